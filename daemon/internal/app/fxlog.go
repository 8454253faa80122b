package app

import (
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
			f.l.Error("start hook failed", "callee", ev.FunctionName, "error", ev.Err)
		} else {
			f.l.Debug("started", "callee", shortName(ev.FunctionName), "took", ev.Runtime.String())
		}
	case *fxevent.OnStopExecuted:
		if ev.Err != nil {
			f.l.Error("stop hook failed", "callee", ev.FunctionName, "error", ev.Err)
		} else {
			f.l.Debug("stopped", "callee", shortName(ev.FunctionName), "took", ev.Runtime.String())
		}
	case *fxevent.Provided:
		if ev.Err != nil {
			f.l.Error("provide failed", "constructor", ev.ConstructorName, "error", ev.Err)
		}
	case *fxevent.Invoked:
		if ev.Err != nil {
			f.l.Error("invoke failed", "function", ev.FunctionName, "error", ev.Err)
		}
	case *fxevent.Started:
		if ev.Err != nil {
			f.l.Error("start failed", "error", ev.Err)
		}
	case *fxevent.Stopped:
		if ev.Err != nil {
			f.l.Error("stop failed", "error", ev.Err)
		}
	case *fxevent.RollingBack:
		f.l.Error("start failed; rolling back", "error", ev.StartErr)
	}
}

func shortName(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
