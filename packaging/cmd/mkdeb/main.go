// Command mkdeb builds the lifecycled Debian package from packaging/nfpm.yaml
// with nfpm, used as a library: make package runs it on freshly built
// binaries, and the install test on the test binaries.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
)

// debianVersion is what dpkg accepts as an upstream version without a
// Debian revision: it starts with a digit.
var debianVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

func main() {
	root := flag.String("root", ".", "the repository's root: nfpm.yaml's paths are relative to it")
	config := flag.String("config", "packaging/nfpm.yaml", "the nfpm config, relative to -root")
	version := flag.String("version", "", "the package's version (Debian rules, e.g. 0.3.0 or 0.3.0~git20261129.59e1ec4)")
	bin := flag.String("bin", "", "the directory holding lifecycled and the lifecycled-plugin-* binaries")
	out := flag.String("out", "dist", "the directory to write lifecycled_<version>_amd64.deb to")
	flag.Parse()
	path, err := build(*root, *config, *version, *bin, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

func build(root, config, version, bin, out string) (string, error) {
	if !debianVersion.MatchString(version) {
		return "", fmt.Errorf("-version %q: want a Debian version starting with a digit (0.3.0, 0.3.0~git20261129.59e1ec4)", version)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	for _, name := range []string{"lifecycled", "lifecycled-plugin-postgres"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return "", fmt.Errorf("-bin %s: %w (build the daemon and its plugins first)", bin, err)
		}
	}
	if out, err = filepath.Abs(out); err != nil {
		return "", err
	}
	// nfpm reads the contents' sources relative to the working directory.
	if err := os.Chdir(root); err != nil {
		return "", err
	}
	env := map[string]string{"VERSION": version, "BIN": bin}
	cfg, err := nfpm.ParseFileWithEnvMapping(config, func(k string) string { return env[k] })
	if err != nil {
		return "", fmt.Errorf("%s: %w", config, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	changelog, err := debianChangelog(info, out)
	if err != nil {
		return "", err
	}
	info.Contents = append(info.Contents, &files.Content{Source: changelog, Destination: "/usr/share/doc/lifecycled/changelog.gz",
		FileInfo: &files.ContentFileInfo{Mode: 0o644, Owner: "root", Group: "root"}})
	if err := nfpm.Validate(info); err != nil {
		return "", err
	}
	deb, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	target := filepath.Join(out, deb.ConventionalFileName(info))
	f, err := os.Create(target)
	if err != nil {
		return "", err
	}
	info.Target = target
	if err := deb.Package(info, f); err != nil {
		f.Close()
		os.Remove(target)
		return "", fmt.Errorf("package: %w", err)
	}
	return target, f.Close()
}

// debianChangelog writes the package's Debian changelog (a native
// package's usr/share/doc/<name>/changelog.gz, which dpkg and lintian
// expect): one entry for this build, pointing at the project's CHANGELOG,
// which the package ships beside it.
func debianChangelog(info *nfpm.Info, dir string) (string, error) {
	var text bytes.Buffer
	fmt.Fprintf(&text, "%s (%s) unstable; urgency=medium\n\n", info.Name, info.Version)
	fmt.Fprintf(&text, "  * Built from the lifecycled sources; what changed is in\n")
	fmt.Fprintf(&text, "    /usr/share/doc/%s/CHANGELOG.md.\n\n", info.Name)
	fmt.Fprintf(&text, " -- %s  %s\n", info.Maintainer, time.Now().UTC().Format(time.RFC1123Z))
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(text.Bytes()); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "changelog.Debian.gz")
	return path, os.WriteFile(path, gz.Bytes(), 0o644)
}
