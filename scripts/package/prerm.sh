#!/bin/sh
# cortexq's prerm: on removal, stop the services (SIGTERM: a replica drains first).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop cortexq-serve cortexq-web >/dev/null 2>&1 || true
fi
exit 0
