#!/bin/bash
# Install what `make test`, `make bench-api` and .ci/run need, from
# Debian's packages (Debian 12). Idempotent: packages already present are
# not touched. Without root or apt-get it installs nothing, says LOUDLY
# what is missing, and exits 0 so the caller can still run the rest (the
# Makefile announces every suite it has to skip because of this).
#
#   mariadb-server mariadb-client   throw-away MariaDB for the MySQL test run
#   python3-gabbi python3-yaml curl Placement conformance harness
#   ganeti-htools                   `hail`, reference for the allocator's differential tests
#   python3-blazarclient python3-openstackclient python3-osc-placement
#                                   real OpenStack clients for client-compat tests
#   wrk                             HTTP load generator for `make bench-api`
#   python3-keystone uwsgi-plugin-python3 jq sqlite3
#                                   a real Keystone for the token-validation tests
#                                   (tests/keystone, ../shared/reference/openstack-harness/keystone-up.sh)
#   galera-4 rsync                  a 3-node MariaDB Galera cluster on loopback for tests/galera
#                                   (scripts/galera-throwaway.sh; rsync state transfer)
#   openstack-dashboard chromium chromium-driver python3-selenium
#                                   Horizon with the blazar-dashboard plugin in headless
#                                   Chromium (tests/horizon); with --no-install-recommends
#                                   no Apache is installed (the package only drops a
#                                   file in /etc/apache2/conf-available)
#   rabbitmq-server python3-oslo.messaging
#                                   a real RabbitMQ and oslo.messaging's notification
#                                   listener for the usage notifications (tests/notify;
#                                   the test starts its own node, never the system one)
#   python3-nova python3-placement python3-oslotest python3-wsgi-intercept
#                                   nova-box (real Nova API, scheduler, conductor and fake
#                                   computes in one process) for tests/nova, with the
#                                   upstream BlazarFilter from ../shared/vendor/blazar-nova,
#                                   and for tests/novafilter (LeaseholdFilter in Nova's
#                                   scheduler, its unit tests on nova.tests' fake HostState);
#                                   python3-placement (with uwsgi-plugin-python3 and
#                                   python3-keystone) is also the real Placement of
#                                   tests/extplacement
#
# The packages' init scripts are kept from starting anything (a system
# MariaDB on 3306 is never started or touched): a policy-rc.d that denies
# every service start is in place while apt-get runs, unless one exists.
set -euo pipefail

PKGS="${LEASEHOLD_DEPS:-mariadb-server mariadb-client python3-gabbi python3-yaml curl ganeti-htools python3-blazarclient python3-openstackclient python3-osc-placement wrk python3-keystone uwsgi-plugin-python3 jq sqlite3 openstack-dashboard chromium chromium-driver python3-selenium rabbitmq-server python3-oslo.messaging python3-nova python3-placement python3-oslotest python3-wsgi-intercept galera-4 rsync}"

missing=()
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present ($PKGS)"
  exit 0
fi

loud() {
  echo "################################################################" >&2
  for l in "$@"; do echo "### $l" >&2; done
  echo "################################################################" >&2
}

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  loud "deps: NOT INSTALLING (need root and apt-get; uid=$(id -u))" \
       "deps: missing packages: ${missing[*]}" \
       "deps: the suites that need them will be SKIPPED (make says which)"
  exit 0
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# leasehold scripts/deps.sh: no service starts during install\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

install() { apt-get install -y -q --no-install-recommends "${missing[@]}"; }
lists_empty() { [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' 2>/dev/null | head -1)" ]; }
if lists_empty || ! install; then
  apt-get update -q
  if ! install; then
    # Install one by one so one unavailable package does not block the rest.
    failed=()
    for p in "${missing[@]}"; do
      apt-get install -y -q --no-install-recommends "$p" || failed+=("$p")
    done
    if [ ${#failed[@]} -gt 0 ]; then
      loud "deps: COULD NOT INSTALL: ${failed[*]}" \
           "deps: the suites that need them will be SKIPPED (make says which)"
    fi
  fi
fi
echo "deps: done"
