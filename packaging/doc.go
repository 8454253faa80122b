// Package packaging builds lifecycled's Debian package (cmd/mkdeb, from
// nfpm.yaml, with nfpm as a library) and tests it: install_test.go
// installs the package into the machine with dpkg, runs the unit's
// command as the service user, upgrades it and removes it.
//
// It is a module of its own, outside the workspace, so that the daemon's
// module does not take on the packager's dependencies.
package packaging
