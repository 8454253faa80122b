//go:build !race

package testsvc

// RaceEnabled reports whether this test binary was built with -race; the
// binaries tests start as subprocesses are then built with it too.
const RaceEnabled = false
