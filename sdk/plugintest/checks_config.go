package plugintest

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// badConfigs checks that Configure refuses each bad config with field
// problems, one of which names the field that is wrong.
func (k *kit) badConfigs(t *testing.T) {
	needOption(t, len(k.o.BadConfigs) > 0, "no BadConfigs given")
	good := k.o.Fixture.Config(t)
	names := make([]string, 0, len(k.o.BadConfigs))
	for name := range k.o.BadConfigs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := k.o.BadConfigs[name]
		k.secrets.addConfig(cfg, "BadConfigs["+name+"]")
		err := k.configure(ctxFor(t, 30*time.Second), cfg)
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			t.Errorf("%s: Configure error = %v, want sdk.ErrInvalidConfig (return sdk.InvalidConfig with one FieldError per problem)", name, err)
			continue
		}
		var e *sdk.Error
		if !errors.As(err, &e) || len(e.Fields) == 0 {
			t.Errorf("%s: invalid config error has no field problems: %v", name, err)
			continue
		}
		var named []string
		for _, f := range e.Fields {
			named = append(named, f.Field)
		}
		if want, ok := k.o.BadConfigFields[name]; ok {
			if !namesAny(named, []string{want}) {
				t.Errorf("%s: Configure's field problems name %q, not %q: put each problem under the key the operator must change (%v)", name, named, want, err)
			}
			continue
		}
		if diff := differingKeys(good, cfg); !namesAny(named, diff) {
			t.Errorf("%s: Configure's field problems name %q, but the config differs from the fixture's only in %q: "+
				"put each problem under the key the operator must change (%v); if the kit guessed wrong, say which in BadConfigFields", name, named, diff, err)
		}
	}
}

// unreachable checks Configure against a store that cannot be reached.
func (k *kit) unreachable(t *testing.T) {
	u, ok := k.o.Fixture.(UnreachableStore)
	if !ok {
		t.Skip("the fixture is not a plugintest.UnreachableStore: implement UnreachableConfig (a config pointing at a port nothing listens on) " +
			"to check that Configure then fails with a retryable error naming the key")
	}
	cfg, field := u.UnreachableConfig(t)
	k.secrets.addConfig(cfg, "UnreachableConfig")
	err := k.configure(ctxFor(t, time.Minute), cfg)
	switch {
	case err == nil:
		t.Errorf("Configure succeeded against a store that cannot be reached (%s): check in Configure that the store answers, "+
			"so that a wrong address is reported when the daemon starts, not at the first erasure", field)
	case sdk.ClassOf(err) != sdk.ClassRetryable:
		t.Errorf("Configure against a store that cannot be reached failed with a %s error: %v; return sdk.Unavailable(err) (or sdk.Retryable): "+
			"the daemon starts the plugin again later, and the store may only be down", sdk.ClassOf(err), err)
	case !mentions(err, field):
		t.Errorf("Configure against a store that cannot be reached failed with %q, which does not name %q: say which setting points at the store "+
			"(fmt.Errorf(\"%s: cannot reach ...: %%w\", err)), or the operator cannot tell what to check", err, field, field)
	}
}

// mentions reports whether err names field in its message or its field
// problems.
func mentions(err error, field string) bool {
	var e *sdk.Error
	if errors.As(err, &e) {
		for _, f := range e.Fields {
			if namesAny([]string{f.Field}, []string{field}) {
				return true
			}
		}
	}
	return regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(field) + `($|[^A-Za-z0-9_])`).MatchString(err.Error())
}

// namesAny reports whether a problem under one of named is about one of
// keys: the key itself, or a part of it ("tables[2]", "tenant_columns.x").
func namesAny(named, keys []string) bool {
	for _, n := range named {
		for _, k := range keys {
			if n == k || strings.HasPrefix(n, k+"[") || strings.HasPrefix(n, k+".") {
				return true
			}
		}
	}
	return false
}

// differingKeys are the top-level keys that bad adds, removes or changes
// compared to good.
func differingKeys(good, bad map[string]any) []string {
	var out []string
	for k, v := range bad {
		if g, ok := good[k]; !ok || fmt.Sprint(g) != fmt.Sprint(v) {
			out = append(out, k)
		}
	}
	for k := range good {
		if _, ok := bad[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
