package testsignal

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failed is a TB that records a failure instead of ending the test.
type failed struct{ msg string }

func (f *failed) Helper() {}
func (f *failed) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestAnOffSignalCostsNothingAndKeepsNothing(t *testing.T) {
	var s Signal[int]
	s.Signal(1)
	s.Drain()
	tb := &failed{}
	s.Wait(tb, "a value")
	require.Contains(t, tb.msg, "never turned on", "a wait on an off signal fails at once")
}

func TestSignalsQueueInOrderWithoutBlocking(t *testing.T) {
	var s Signal[int]
	s.Init()
	for i := range 10000 {
		s.Signal(i) // no waiter: a send must not block
	}
	require.Equal(t, 0, s.Wait(t, "the first value"))
	require.Equal(t, 5000, s.WaitFor(t, "a value from 5000", func(v int) bool { return v >= 5000 }))
	require.Equal(t, 5001, s.Wait(t, "the value after the match"), "what came before the match is gone, what came after stays")
	s.Drain()
	s.Signal(-1)
	require.Equal(t, -1, s.Wait(t, "the value after the drain"))
}

func TestAWaitSeesAValueSignalledWhileItWaits(t *testing.T) {
	var s Signal[string]
	s.Init()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 100 {
			s.Signal(fmt.Sprint(i))
		}
	}()
	require.Equal(t, "99", s.WaitFor(t, "the last value", func(v string) bool { return v == "99" }))
	wg.Wait()
}

func TestAWaitThatNothingAnswersFailsSayingWhat(t *testing.T) {
	var s Signal[int]
	s.Init()
	s.Signal(1)
	tb := &failed{}
	s.within(tb, 20*time.Millisecond, "a value above one", func(v int) bool { return v > 1 })
	require.Contains(t, tb.msg, "a value above one")
}
