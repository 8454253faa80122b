package e2e

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// e2eParallel is how many of this package's tests run at once unless
// -parallel is given. The default (GOMAXPROCS, 2 on the CI machine) left
// the package's 88 tests, most of them waiting on daemons, grace periods,
// leases and brokers rather than computing, at 1.8 tests at a time: 449 s
// of CI's critical path for 792 s of tests.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(e2eParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
