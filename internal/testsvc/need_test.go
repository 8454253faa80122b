package testsvc

import (
	"fmt"
	"testing"
)

// stopRecorder records how Need stopped a test, without stopping this one.
type stopRecorder struct {
	testing.TB
	how string
}

func (r *stopRecorder) Helper() {}
func (r *stopRecorder) Fatalf(format string, args ...any) {
	r.how = "fail: " + fmt.Sprintf(format, args...)
}
func (r *stopRecorder) Skip(args ...any) { r.how = "skip: " + fmt.Sprint(args...) }

func TestNeedFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	tests := map[string]struct {
		ci   string
		ok   bool
		want string
	}{
		"present":             {ci: "true", ok: true, want: ""},
		"missing under CI":    {ci: "true", want: "fail: kcat is needed (apt-get install kcat) (CI=true: a missing requirement fails instead of skipping)"},
		"missing elsewhere":   {ci: "", want: "skip: kcat is needed (apt-get install kcat)"},
		"CI set to something": {ci: "1", want: "skip: kcat is needed (apt-get install kcat)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &stopRecorder{}
			Need(r, tc.ok, "%s is needed (%s)", "kcat", "apt-get install kcat")
			if r.how != tc.want {
				t.Errorf("Need stopped the test with %q, want %q", r.how, tc.want)
			}
		})
	}
}

func TestToolFindsAnInstalledProgram(t *testing.T) {
	r := &stopRecorder{}
	if path := Tool(r, "sh", "any POSIX system has it"); path == "" || r.how != "" {
		t.Errorf("Tool(sh) = %q, stopped with %q", path, r.how)
	}
	t.Setenv("CI", "true")
	Tool(r, "no-such-program-lifecycled", "nowhere")
	if r.how == "" || r.how[:5] != "fail:" {
		t.Errorf("a missing program under CI stopped the test with %q, want a failure", r.how)
	}
}
