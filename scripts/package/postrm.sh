#!/bin/sh
# cortexq's postrm: systemd forgets the units once they are gone.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
