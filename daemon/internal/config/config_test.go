package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func noEnv(string) (string, bool) { return "", false }

func parse(t *testing.T, text string) (*Config, error) {
	t.Helper()
	return Parse(text, "/etc/lifecycled/config.toml", noEnv)
}

func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var ce *Error
	require.ErrorAs(t, err, &ce)
	return ce.Problems
}

func TestRepoConfigLoadsAndUsesEmbeddedDefaults(t *testing.T) {
	cfg, err := Load("../../../config.toml")
	require.NoError(t, err)
	kind, dsn, err := cfg.StateDSN()
	require.NoError(t, err)
	require.Equal(t, StateSQLite, kind)
	abs, _ := filepath.Abs("../../../var/lifecycled.db")
	require.Equal(t, abs, dsn)
	sock, err := cfg.SocketPath()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(sock, "/var/lifecycled.sock"), sock)
	require.Empty(t, cfg.Deleters, "the embedded default must not need any store")
	require.Empty(t, cfg.DLQSources)
	require.Equal(t, 30*time.Second, cfg.Daemon.ShutdownTimeout.Duration)
	require.Equal(t, 72*time.Hour, cfg.Idempotency.TTL.Duration)
	require.Equal(t, 24*time.Hour, cfg.Deletion.ReverifyInterval.Duration)
	require.Equal(t, 10.0, cfg.Deletion.ReverifyRate)
	require.False(t, cfg.Deletion.Reerase, "re-erasing is asked for, never a default")
}

func TestPackagedDefaultAndExamplesValidate(t *testing.T) {
	_, err := Parse(DefaultTOML(), "/etc/lifecycled/config.toml", noEnv)
	require.NoError(t, err)

	files, err := filepath.Glob("../../../deploy/examples/*.toml")
	require.NoError(t, err)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			require.NoError(t, err)
			env := func(k string) (string, bool) {
				if k == "CREDENTIALS_DIRECTORY" {
					return t.TempDir(), true
				}
				return "", false
			}
			_, err = Parse(string(text), f, env)
			// Examples name secret files that only exist on a real host.
			if err != nil {
				for _, p := range problems(t, err) {
					require.Contains(t, p.Msg, "cannot read secret file", p.String())
				}
			}
		})
	}
}

func TestProblemsNameKeyAndLine(t *testing.T) {
	tests := map[string]struct {
		text    string
		wantKey string
		line    int
		msg     string
	}{
		"unknown top-level key": {
			text: "version = 1\nbogus = 3\n", wantKey: "bogus", line: 2, msg: "unknown key",
		},
		"unknown key in table": {
			text: "version = 1\n[daemon]\nstate = \"sqlite://x.db\"\nplugin_dri = \"./bin\"\n", wantKey: "daemon.plugin_dri", line: 4, msg: "unknown key",
		},
		"bad duration": {
			text: "version = 1\n[daemon]\nshutdown_timeout = \"30x\"\n", wantKey: "daemon.shutdown_timeout", line: 3, msg: "invalid duration",
		},
		"negative duration": {
			text: "version = 1\n[retry]\ninitial_delay = \"-1s\"\n", wantKey: "retry.initial_delay", line: 3, msg: "positive",
		},
		"bad jitter": {
			text: "version = 1\n\n[retry]\njitter = \"some\"\n", wantKey: "retry.jitter", line: 4, msg: "none",
		},
		"plugin message limit below gRPC's default": {
			text: "version = 1\n[plugins]\nmax_message_bytes = 1048576\n", wantKey: "plugins.max_message_bytes", line: 3, msg: "4 MiB",
		},
		"reverify interval too short": {
			text: "version = 1\n[deletion]\nreverify_interval = \"500ms\"\n", wantKey: "deletion.reverify_interval", line: 3, msg: "\"0s\" (off) or between",
		},
		"reverify interval negative": {
			text: "version = 1\n[deletion]\nreverify_interval = \"-1h\"\n", wantKey: "deletion.reverify_interval", line: 3, msg: "(off)",
		},
		"reverify rate zero": {
			text: "version = 1\n[deletion]\n\nreverify_rate = 0.0\n", wantKey: "deletion.reverify_rate", line: 4, msg: "above 0",
		},
		"reverify rate too high": {
			text: "version = 1\n[deletion]\nreverify_rate = 1e9\n", wantKey: "deletion.reverify_rate", line: 3, msg: "at most 100000",
		},
		"wrong version": {
			text: "version = 2\n", wantKey: "version", line: 1, msg: "unsupported version 2",
		},
		"tcp admin listener": {
			text: "version = 1\n[admin]\nlisten = \"tcp://0.0.0.0:80\"\n", wantKey: "admin.listen", line: 3, msg: "unix://",
		},
		"world-accessible socket": {
			text: "version = 1\n[admin]\nsocket_mode = \"0666\"\n", wantKey: "admin.socket_mode", line: 3, msg: "others",
		},
		"public metrics listener": {
			text: "version = 1\n[admin]\nmetrics_listen = \"0.0.0.0:9464\"\n", wantKey: "admin.metrics_listen", line: 3, msg: "loopback",
		},
		"bad state scheme": {
			text: "version = 1\n[daemon]\nstate = \"mysql://x\"\n", wantKey: "daemon.state", line: 3, msg: "sqlite://",
		},
		"unanchored tenant regexp": {
			text: "version = 1\n[daemon]\ntenant_id_format = \"[a-z]+\"\n", wantKey: "daemon.tenant_id_format", line: 3, msg: "anchored",
		},
		"duplicate deleter name": {
			text:    "version = 1\n[[deleter]]\nname = \"a\"\nplugin = \"redis\"\n[[deleter]]\nname = \"a\"\nplugin = \"redis\"\n",
			wantKey: "deleter.1.name", line: 6, msg: "duplicate name",
		},
		"unknown key in deleter": {
			text: "version = 1\n[[deleter]]\nname = \"a\"\nplugin = \"redis\"\nsha = \"x\"\n", wantKey: "deleter.sha", line: 5, msg: "unknown key",
		},
		"bad sha256": {
			text: "version = 1\n[[deleter]]\nname = \"a\"\nplugin = \"redis\"\nsha256 = \"abc\"\n", wantKey: "deleter[a].sha256", line: 5, msg: "64 hex",
		},
		"unset variable": {
			text: "version = 1\n[daemon]\nstate = \"postgres://${PGUSER_UNSET}@h/db\"\n", wantKey: "daemon.state", line: 3, msg: "PGUSER_UNSET is not set",
		},
		"missing version": {
			text: "[daemon]\n", wantKey: "version", line: 0, msg: "missing",
		},
		"toml syntax": {
			text: "version = 1\nstate = = 2\n", wantKey: "state", line: 2, msg: "expected value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.text)
			require.Error(t, err)
			ps := problems(t, err)
			var found bool
			for _, p := range ps {
				if p.Key == tc.wantKey && p.Line == tc.line && strings.Contains(p.Msg, tc.msg) {
					found = true
				}
			}
			require.True(t, found, "want problem at line %d key %q containing %q; got:\n%v", tc.line, tc.wantKey, tc.msg, err)
			require.Contains(t, err.Error(), "/etc/lifecycled/config.toml", "messages name the file")
		})
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	text := `version = 1
[daemon]
shutdown_timeout = "soon"
unknown_thing = 1
[retry]
jitter = "wobbly"
multiplier = 0.5
`
	_, err := parse(t, text)
	ps := problems(t, err)
	require.Len(t, ps, 4, "%v", err)
	lines := []int{ps[0].Line, ps[1].Line, ps[2].Line, ps[3].Line}
	require.Equal(t, []int{3, 4, 6, 7}, lines, "problems sorted by line")
}

func TestInterpolation(t *testing.T) {
	env := map[string]string{"PGHOST": "db.internal", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := map[string]struct {
		in, want string
		wantErr  string
	}{
		"plain":                {in: "abc", want: "abc"},
		"set":                  {in: "postgres://app@${PGHOST}/app", want: "postgres://app@db.internal/app"},
		"default used":         {in: "${NOPE:-fallback}", want: "fallback"},
		"default not used":     {in: "${PGHOST:-fallback}", want: "db.internal"},
		"empty with default":   {in: "${EMPTY:-x}", want: "x"},
		"empty no default":     {in: "a${EMPTY}b", want: "ab"},
		"empty default":        {in: "${NOPE:-}", want: ""},
		"escaped":              {in: "$${PGHOST}", want: "${PGHOST}"},
		"unset":                {in: "${NOPE}", wantErr: "NOPE is not set"},
		"malformed":            {in: "${not closed", wantErr: "malformed"},
		"two vars":             {in: "${PGHOST}:${NOPE:-5432}", want: "db.internal:5432"},
		"dollar without brace": {in: "$PGHOST", want: "$PGHOST"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Interpolate(tc.in, lookup)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestInterpolationReachesPluginConfigAndDurations(t *testing.T) {
	text := `version = 1
[daemon]
shutdown_timeout = "${STOP:-45s}"
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = "${REDIS_ADDR}"
patterns = ["session:{tenant}:${SUFFIX:-*}"]
`
	lookup := func(k string) (string, bool) {
		if k == "REDIS_ADDR" {
			return "10.0.0.5:6379", true
		}
		return "", false
	}
	cfg, err := Parse(text, "/x/config.toml", lookup)
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, cfg.Daemon.ShutdownTimeout.Duration)
	pc := cfg.Deleters[0].PluginConfig()
	require.Equal(t, "10.0.0.5:6379", pc["addr"])
	require.Equal(t, []any{"session:{tenant}:*"}, pc["patterns"])
}

func TestPerInstanceTimeoutsOverrideGlobal(t *testing.T) {
	text := `version = 1
[plugins]
shutdown_timeout = "5s"
delete_timeout = "1h"
[[deleter]]
name = "pg:slow"
plugin = "postgres"
shutdown_timeout = "40s"
delete_timeout = "6h"
[[deleter]]
name = "redis:fast"
plugin = "redis"
`
	cfg, err := parse(t, text)
	require.NoError(t, err)
	require.Equal(t, 40*time.Second, cfg.Deleters[0].ShutdownTimeout.Duration)
	require.Equal(t, 6*time.Hour, cfg.Deleters[0].DeleteTimeout.Duration)
	require.Zero(t, cfg.Deleters[1].ShutdownTimeout.Duration, "unset per-instance value falls back to [plugins]")
	require.Equal(t, 5*time.Second, cfg.Plugins.ShutdownTimeout.Duration)
}

func TestNestedPluginConfigIsOpaque(t *testing.T) {
	text := "version = 1\n[[dlq_source]]\nname = \"k\"\nplugin = \"kafka\"\n[dlq_source.config]\nsasl = { mechanism = \"plain\", username = \"u\" }\n[dlq_source.config.tls]\nenabled = true\n"
	cfg, err := parse(t, text)
	require.NoError(t, err)
	pc := cfg.DLQSources[0].PluginConfig()
	require.Equal(t, map[string]any{"mechanism": "plain", "username": "u"}, pc["sasl"])
	require.Equal(t, map[string]any{"enabled": true}, pc["tls"])
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pg"), []byte("s3cr3t-state\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis"), []byte("s3cr3t-redis"), 0o600))
	text := `version = 1
[daemon]
state = "postgres://lifecycled@db/lifecycled"
state_password_file = "pg"
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = "127.0.0.1:6379"
password_file = "redis"
token = "inline-token"
`
	cfg, err := Parse(text, filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	kind, dsn, err := cfg.StateDSN()
	require.NoError(t, err)
	require.Equal(t, StatePostgres, kind)
	require.Equal(t, "postgres://lifecycled:s3cr3t-state@db/lifecycled", dsn)
	pc := cfg.Deleters[0].PluginConfig()
	require.Equal(t, "s3cr3t-redis", pc["password"], "plugins get the secret, not the path")
	require.NotContains(t, pc, "password_file")

	dump, err := Dump(cfg)
	require.NoError(t, err)
	for _, secret := range []string{"s3cr3t-state", "s3cr3t-redis", "inline-token"} {
		require.NotContains(t, dump, secret)
	}
	require.Contains(t, dump, Redacted)
	require.Contains(t, dump, `password_file = "redis"`, "paths are not secrets")

	// The dump is itself a valid config.
	_, err = Parse(dump, filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
}

func TestMissingSecretFileIsAProblem(t *testing.T) {
	text := "version = 1\n[daemon]\nstate = \"postgres://u@h/d\"\nstate_password_file = \"/nonexistent/pw\"\n"
	_, err := parse(t, text)
	ps := problems(t, err)
	require.Equal(t, "daemon.state_password_file", ps[0].Key)
	require.Equal(t, 4, ps[0].Line)
}

func TestDumpRedactsURLPasswords(t *testing.T) {
	text := "version = 1\n[daemon]\nstate = \"postgres://u:hunter2@h/d\"\n[[dlq_source]]\nname=\"k\"\nplugin=\"kafka\"\n[dlq_source.config]\nurl = \"http://a:hunter3@x\"\nsasl_password = \"hunter4\"\n"
	cfg, err := parse(t, text)
	require.NoError(t, err)
	dump, err := Dump(cfg)
	require.NoError(t, err)
	require.NotContains(t, dump, "hunter")
}

// Every way a DSN can carry a secret is redacted in a dump: URL user info,
// URL query parameters, key=value DSNs, passphrases, and secrets inside lists.
func TestDumpRedactsEverySpellingOfADSNSecret(t *testing.T) {
	for name, state := range map[string]string{
		"url query":      "postgres://u@h/d?sslmode=require&password=hunter2",
		"key=value":      "postgres://x@h/d", // the deleter below carries the key=value form
		"sslpassword":    "postgres://u@h/d?sslpassword=hunter2",
		"passphrase key": "postgres://u@h/d?passphrase=hunter2",
	} {
		t.Run(name, func(t *testing.T) {
			text := "version = 1\n[daemon]\nstate = \"" + state + "\"\n" +
				"[[deleter]]\nname=\"pg\"\nplugin=\"postgres\"\n[deleter.config]\n" +
				"dsn = \"host=db user=app password=hunter5 dbname=app\"\n" +
				"tls_key_passphrase = \"hunter6\"\n" +
				"brokers = [\"sasl://u:hunter7@b:9092\"]\n" +
				"extra = [{ token = \"hunter8\" }]\n"
			cfg, err := parse(t, text)
			require.NoError(t, err)
			dump, err := Dump(cfg)
			require.NoError(t, err)
			require.NotContains(t, dump, "hunter")
			require.Contains(t, dump, "host=db user=app", "what is not secret stays readable")
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	require.True(t, errors.Is(err, ErrNotFound))
}

func TestIsSecretKey(t *testing.T) {
	for k, want := range map[string]bool{
		"password": true, "sasl_password": true, "secret_access_key": true, "access_key_id": true,
		"token": true, "password_file": false, "partition_key": false, "tenant_column": false,
		"dsn": false, "addr": false, "tls_key_passphrase": true, "passphrase": true,
	} {
		require.Equal(t, want, IsSecretKey(k), k)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(DefaultTOML())
	f.Add("version = 1\n[daemon]\nstate = \"${X:-sqlite://a}\"\n")
	f.Add("version = 1\n[[deleter]]\nname=\"a\"\nplugin=\"b\"\n[deleter.config]\nx_file=\"/dev/null\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse(text, "/fuzz/config.toml", noEnv)
		if err == nil {
			// A valid config always dumps and re-parses.
			dump, derr := Dump(cfg)
			if derr != nil {
				t.Fatalf("dump of valid config failed: %v", derr)
			}
			_ = dump
		} else {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
		}
	})
}

func TestEachProblemOnceAndDeletersByName(t *testing.T) {
	text := "version = 1\n[[deleter]]\nname = \"postgres:app\"\nplugin = \"postgres\"\n[deleter.config]\npassword_file = \"${CREDENTIALS_DIRECTORY}/pw\"\n" +
		"[[dlq_source]]\nname = \"kafka\"\nplugin = \"kafka\"\n[dlq_source.config]\nsasl = { password_file = \"/nonexistent/pw\" }\n"
	_, err := parse(t, text)
	ps := problems(t, err)
	require.Len(t, ps, 2, "one problem per key: %v", ps)
	require.Equal(t, "deleter[postgres:app].config.password_file", ps[0].Key)
	require.Equal(t, 6, ps[0].Line)
	require.Contains(t, ps[0].Msg, "CREDENTIALS_DIRECTORY is not set")
	require.Equal(t, "dlq_source[kafka].config.sasl.password_file", ps[1].Key)
	require.Contains(t, ps[1].Msg, "cannot read secret file")
}

func TestValidateWithoutSecrets(t *testing.T) {
	text := "version = 1\n[daemon]\nstate = \"postgres://lifecycled@db/lifecycled\"\nstate_password_file = \"${CREDENTIALS_DIRECTORY}/state\"\n" +
		"[[deleter]]\nname = \"postgres:app\"\nplugin = \"postgres\"\n[deleter.config]\npassword_file = \"${CREDENTIALS_DIRECTORY}/pw\"\ndsn = \"${DB_HOST}\"\n"
	_, err := ParseWith(text, "/etc/lifecycled/config.toml", noEnv, ParseOptions{WithoutSecrets: true})
	ps := problems(t, err)
	require.Len(t, ps, 1, "secret files and their paths are not checked, everything else is: %v", ps)
	require.Equal(t, "deleter[postgres:app].config.dsn", ps[0].Key)

	text = strings.Replace(text, "${DB_HOST}", "postgres://app@db/app", 1)
	cfg, err := ParseWith(text, "/etc/lifecycled/config.toml", noEnv, ParseOptions{WithoutSecrets: true})
	require.NoError(t, err)
	require.Len(t, cfg.Deleters, 1)
}

func TestTOMLTypeErrorsReadLikeTheRest(t *testing.T) {
	for name, tc := range map[string]struct{ text, key, msg string }{
		"int for string":      {"version = 1\n[admin]\nsocket_mode = 660\n", "admin.socket_mode", `want a string, got an integer (socket_mode = "0660")`},
		"octal-looking int":   {"version = 1\n[admin]\nsocket_mode = 0660\n", "admin.socket_mode", `write it as a string: socket_mode = "0660"`},
		"string for int":      {"version = 1\n[retry]\nmax_retries = \"3\"\n", "retry.max_retries", "want an integer, got a string"},
		"int for duration":    {"version = 1\n[daemon]\nshutdown_timeout = 30\n", "daemon.shutdown_timeout", `want a duration string such as "30s", got the number 30 without a unit`},
		"string for bool":     {"version = 1\n[retry]\nenabled = \"yes\"\n", "retry.enabled", "want true or false, got a string"},
		"string for int list": {"version = 1\n[admin]\nallow_uids = \"0\"\n", "admin.allow_uids", "want an array, got a string"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.text)
			ps := problems(t, err)
			require.Len(t, ps, 1)
			require.Equal(t, tc.key, ps[0].Key)
			require.Equal(t, 3, ps[0].Line)
			require.Contains(t, ps[0].Msg, tc.msg)
			require.NotContains(t, ps[0].Msg, "int64")
		})
	}
}
