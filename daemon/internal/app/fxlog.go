package app

import (
	"go.uber.org/dig"
	"strings"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/fx/fxevent"
)

// fxLogger sends fx's lifecycle events to hclog: hook runs at debug, failures
// at error, so that a normal start is quiet and a broken one says why.
type fxLogger struct{ l hclog.Logger }

func (f fxLogger) LogEvent(e fxevent.Event) {
	switch ev := e.(type) {
	case *fxevent.OnStartExecuted:
		if ev.Err != nil {
			f.l.Error("start hook failed", "callee", ev.FunctionName, "error", cause(ev.Err))
		} else {
			f.l.Debug("started", "callee", shortName(ev.FunctionName), "took", ev.Runtime.String())
		}
	case *fxevent.OnStopExecuted:
		if ev.Err != nil {
			f.l.Error("stop hook failed", "callee", ev.FunctionName, "error", cause(ev.Err))
		} else {
			f.l.Debug("stopped", "callee", shortName(ev.FunctionName), "took", ev.Runtime.String())
		}
	case *fxevent.Provided:
		if ev.Err != nil {
			f.l.Error("provide failed", "constructor", ev.ConstructorName, "error", cause(ev.Err))
		}
	case *fxevent.Invoked:
		if ev.Err != nil {
			// fx.Populate invokes a reflect stub: its name says nothing.
			if strings.HasPrefix(ev.FunctionName, "reflect.") {
				f.l.Error("start failed", "error", cause(ev.Err))
			} else {
				f.l.Error("invoke failed", "function", ev.FunctionName, "error", cause(ev.Err))
			}
		}
	case *fxevent.Started:
		if ev.Err != nil {
			f.l.Error("start failed", "error", cause(ev.Err))
		}
	case *fxevent.Stopped:
		if ev.Err != nil {
			f.l.Error("stop failed", "error", cause(ev.Err))
		}
	case *fxevent.RollingBack:
		f.l.Error("start failed; rolling back", "error", cause(ev.StartErr))
	}
}

func shortName(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// cause strips fx's and dig's wrapping ("could not build arguments for
// function ..."): operators need the error that happened, not the
// dependency graph it happened in.
func cause(err error) error { return dig.RootCause(err) }
