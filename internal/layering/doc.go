// Package layering holds the test that keeps the import rules of
// docs/architecture.md true: the sdk is a leaf, a plugin is written against
// package sdk and not the daemon's end of the protocol (sdk/host), fx stays
// in the app, and the domain packages do not reach for the state store or
// the admin API.
// The rules are checked on `go list -deps` of the whole module, so a new
// import that breaks one fails `go test`, not a review.
//
// It also keeps the map itself true: docs/architecture.md names every
// package and stays a map (MaxMapBytes), and no API path is written outside
// the server and its typed client (APIPathLiterals).
package layering

// Module is the module's import path.
const Module = "github.com/lifecycled/lifecycled"

// Package is what go list says of one package.
type Package struct {
	ImportPath   string
	Module       *struct{ Path string }
	Imports      []string // direct, non-test
	Deps         []string // transitive, non-test
	TestImports  []string
	XTestImports []string
}

// domain are the packages that hold the daemon's logic: they define the
// interfaces they need and are wired to the store and the API by the app.
var domain = []string{
	"daemon/internal/deletion",
	"daemon/internal/dlq",
	"daemon/internal/dlq/intake",
	"daemon/internal/dlq/bulk",
	"daemon/internal/dlq/searchindex",
	"daemon/internal/archive",
	"daemon/internal/retry",
	"daemon/internal/periodic",
	"daemon/internal/leased",
	"daemon/internal/pluginhost",
}

// domainMayNotUse are what a domain package may not depend on, even
// through another package.
var domainMayNotUse = []string{"daemon/internal/store", "daemon/internal/adminapi"}

// pluginDirs hold the plugins: each is written as one outside this
// repository would be, against package sdk, whose go doc is the contract.
var pluginDirs = []string{"plugins", "sdk/example"}

// sdkHost is the daemon's end of the plugin protocol.
const sdkHost = "sdk/host"

// Violations lists every package of the module that breaks a rule:
//
//   - sdk (and below) imports nothing of the module outside sdk, directly or
//     not, so that it can become a module of its own;
//   - a plugin (plugins/..., sdk/example/...) does not depend on sdk/host:
//     what it needs of the protocol is in package sdk;
//   - no package but daemon/internal/app imports go.uber.org/fx or
//     go.uber.org/dig, not even in its tests: every module works without fx;
//   - a domain package does not depend on the state store or the admin API.
func Violations(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := within(p.ImportPath, Module)
		if !ok {
			continue
		}
		if under(rel, "sdk") {
			for _, d := range p.Deps {
				if dr, ok := within(d, Module); ok && !under(dr, "sdk") {
					out = append(out, p.ImportPath+" depends on "+d+": the sdk imports nothing of the daemon or the plugins")
				}
			}
		}
		for _, dir := range pluginDirs {
			if !under(rel, dir) {
				continue
			}
			for _, d := range p.Deps {
				if dr, ok := within(d, Module); ok && under(dr, sdkHost) {
					out = append(out, p.ImportPath+" depends on "+d+": a plugin is written against package sdk, sdk/host is the daemon's end")
				}
			}
		}
		if rel != "daemon/internal/app" {
			for _, list := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
				for _, imp := range list {
					if under(imp, "go.uber.org/fx") || under(imp, "go.uber.org/dig") {
						out = append(out, p.ImportPath+" imports "+imp+": fx stays in daemon/internal/app")
					}
				}
			}
		}
		for _, dom := range domain {
			if rel != dom {
				continue
			}
			for _, d := range p.Deps {
				dr, ok := within(d, Module)
				if !ok {
					continue
				}
				for _, bad := range domainMayNotUse {
					if under(dr, bad) {
						out = append(out, p.ImportPath+" depends on "+d+": a domain package defines the interface it needs and the app wires it")
					}
				}
			}
		}
	}
	return out
}

// within returns path relative to root when path is root or below it.
func within(path, root string) (string, bool) {
	if path == root {
		return "", true
	}
	if len(path) > len(root) && path[:len(root)] == root && path[len(root)] == '/' {
		return path[len(root)+1:], true
	}
	return "", false
}

func under(path, root string) bool {
	_, ok := within(path, root)
	return ok
}
