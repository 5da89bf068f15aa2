#!/bin/sh
# cortexq's postinst: the cortexq system user the services run as, owning /var/lib/cortexq;
# /etc/cortexq/cortexq.env readable by that group only (it may hold a password).
set -e
if [ "$1" = configure ]; then
	if ! getent passwd cortexq >/dev/null; then
		adduser --system --group --home /var/lib/cortexq --no-create-home --quiet cortexq
	fi
	chown cortexq:cortexq /var/lib/cortexq
	chown root:cortexq /etc/cortexq/cortexq.env
	chmod 0640 /etc/cortexq/cortexq.env
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null || true
		# An upgrade restarts nothing: the new release's `cortexq migrate up` comes first, then
		# the replicas are restarted one at a time (a rolling upgrade: README.Debian).
		if [ -n "$2" ] && systemctl is-active --quiet cortexq-serve; then
			echo "cortexq: run \`cortexq migrate up\` (once for the database), then \`systemctl restart cortexq-serve cortexq-web\` (one machine at a time)"
		fi
	fi
fi
exit 0
