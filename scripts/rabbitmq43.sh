#!/usr/bin/env bash
# rabbitmq43.sh - run RabbitMQ 4.3 (the package of Debian's next release, "forky") in a
# chroot of its own on 127.0.0.1:5675 (TLS: 5676), beside RabbitMQ 4.0 on 5673: from
# 4.3 a quorum queue counts a failed delivery (`basic.reject`, a lost channel) and no
# more a return (`basic.nack`); scripts/test runs both RabbitMQ adapters' tests on both.
# Usage and everything else as scripts/rabbitmq4.sh (start, stop, restart, status, ctl).
export RABBITMQ4_RELEASE=4.3
exec "$(dirname "${BASH_SOURCE[0]}")/rabbitmq4.sh" "$@"
