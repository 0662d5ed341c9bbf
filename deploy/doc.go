// Package deploy holds what runs flowdedup as a service: a systemd unit
// (flowdedup.service) and its example settings (flowdedup.env), and the
// tests that check them. It has no Go API.
//
// The tests check the unit the way it will run, short of a systemd to run
// it in: systemd-analyze verifies the unit and rates its sandbox; the
// command line of its ExecStart, expanded from the example settings, runs
// as an unprivileged user holding only the unit's capabilities
// (AmbientCapabilities, set with setpriv), in a network namespace the test
// makes, and must attach XDP, capture, and write its per-window files; and
// every system call it makes, traced with strace, must be one the unit's
// SystemCallFilter allows. The ClickHouse password the unit and settings
// show, commented out (LoadCredential= and password_file=
// ${CREDENTIALS_DIRECTORY}/clickhouse-password), is checked uncommented:
// the unit still verifies, and the export URL logs in to a real
// clickhouse-server with the password from the credential's file.
//
// prometheus/ holds Prometheus recording and alerting rules
// (flowdedup.rules.yml) and their unit tests (flowdedup.rules.test.yml);
// the tests here run promtool check rules and promtool test rules on them,
// and check that every flowdedup_ metric they name is one a running
// flowdedup collect registers.
package deploy
