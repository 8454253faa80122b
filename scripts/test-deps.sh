#!/usr/bin/env bash
# Installs (when it can) and starts what the tests need, and says clearly what
# is missing when it cannot. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

have redis-server || need_apt+=(redis-server)
# RabbitMQ for the rabbitmq plugin: each test makes a vhost of its own
# with rabbitmqctl, on the server at 127.0.0.1:5672 (guest/guest).
[ -x /usr/sbin/rabbitmq-server ] || have rabbitmq-server || need_apt+=(rabbitmq-server)
have node || need_apt+=(nodejs)
have npm || need_apt+=(npm)
have kcat || need_apt+=(kcat)
have promtool || need_apt+=(prometheus)
have protoc || need_apt+=(protobuf-compiler)
have systemd-analyze || need_apt+=(systemd)
# The package's install test checks it with Debian's package checker.
have lintian || need_apt+=(lintian)
have curl || need_apt+=(curl)
have psql || need_apt+=(postgresql-client)
# The web console's tests drive a real headless browser (chromedp).
have chromium || need_apt+=(chromium)
# The Python example plugin runs on Debian's interpreter and packages.
pyhas() { /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }
pyhas grpc || need_apt+=(python3-grpcio)
pyhas google.protobuf || need_apt+=(python3-protobuf)
pyhas cryptography || need_apt+=(python3-cryptography)
pyhas grpc_tools || need_apt+=(python3-grpc-tools)
# libseccomp's bindings build the unit's system-call filter around the daemon.
pyhas seccomp || need_apt+=(python3-seccomp)
# MariaDB for the mysql plugin, unless LIFECYCLED_TEST_MYSQL names a server.
fresh_mariadb=""
if [ -z "${LIFECYCLED_TEST_MYSQL:-}" ] && ! have mariadbd && ! have mysqld && [ ! -x /usr/sbin/mariadbd ]; then
  need_apt+=(mariadb-server)
  fresh_mariadb=1
fi
have_initdb() { [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if [ -z "${LIFECYCLED_TEST_PG:-}" ] && ! have_initdb; then need_apt+=(postgresql); fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    echo "test-deps: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test-deps: missing ${need_apt[*]}; install them (Debian: sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

# PostgreSQL: `make test` runs the tests against a throwaway cluster that
# scripts/test-pg.sh creates (initdb -A trust, a free port) and removes, so the
# machine's own cluster is neither needed nor touched. LIFECYCLED_TEST_PG
# names another server instead.
if [ -z "${LIFECYCLED_TEST_PG:-}" ] && ! have_initdb; then
  echo "test-deps: no PostgreSQL server binaries (initdb); install postgresql or set LIFECYCLED_TEST_PG" >&2
  exit 1
fi

# MariaDB: the tests connect as root without a password over TCP
# (127.0.0.1:3306) and create a database per test; LIFECYCLED_TEST_MYSQL
# names another server (go-sql-driver DSN, e.g. root:pw@tcp(db:3306)/).
if [ -z "${LIFECYCLED_TEST_MYSQL:-}" ]; then
  mysql_up() { mysqladmin --protocol=tcp -h127.0.0.1 -uroot ping >/dev/null 2>&1; }
  if ! mysql_up; then
    if [ "$(id -u)" = 0 ]; then
      echo "test-deps: starting MariaDB"
      if have service; then service mariadb start >/dev/null 2>&1 || service mysql start >/dev/null 2>&1 || true; fi
      if ! mysqladmin ping >/dev/null 2>&1; then
        (mysqld_safe >/dev/null 2>&1 &) # no init system (a container)
      fi
      for _ in $(seq 1 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.5; done
      # A fresh Debian install lets root in through the Unix socket only;
      # the tests come over TCP. Only a server this script installed is
      # changed this way.
      if ! mysql_up && [ -n "$fresh_mariadb" ]; then
        mysql -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')" || true
      fi
    fi
    if ! mysql_up; then
      echo "test-deps: MariaDB does not answer as root without a password on 127.0.0.1:3306; start it, or set LIFECYCLED_TEST_MYSQL to a go-sql-driver DSN of a user that may create databases and users" >&2
      exit 1
    fi
  fi
fi

# RabbitMQ: the tests connect as guest (whom RabbitMQ lets in from
# localhost only) to 127.0.0.1:5672 and make a vhost per test.
rabbit_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) >/dev/null 2>&1 && rabbitmqctl -q status >/dev/null 2>&1; }
if ! rabbit_up; then
  if [ "$(id -u)" = 0 ]; then
    echo "test-deps: starting RabbitMQ"
    if have service; then service rabbitmq-server start >/dev/null 2>&1 || true; fi
    rabbit_up || rabbitmq-server -detached >/dev/null 2>&1 || true # no init system (a container)
    for _ in $(seq 1 240); do rabbit_up && break; sleep 0.5; done
  fi
  if ! rabbit_up; then
    echo "test-deps: RabbitMQ does not answer on 127.0.0.1:5672 (rabbitmqctl status fails); start rabbitmq-server" >&2
    exit 1
  fi
fi

# dynalite, pinned by test/dynalite/package-lock.json.
if [ ! -f test/dynalite/node_modules/dynalite/cli.js ] || [ test/dynalite/package-lock.json -nt test/dynalite/node_modules/.package-lock.json ]; then
  echo "test-deps: installing dynalite"
  npm ci --prefix test/dynalite --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "test-deps: ok (PostgreSQL, MariaDB, redis-server, RabbitMQ, dynalite, kcat, promtool, protoc, Python gRPC, libseccomp's Python bindings, systemd-analyze, curl, chromium)"
