package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every key the config takes has a row in the "Configuration keys" table
// of docs/reference.md: a row whose first cell names the key's table
// (`[deletion] max_jobs`, or `[[dlq.topic]] match` and the key in
// backticks).
func TestReferenceListsEveryConfigKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "reference.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Configuration keys\n")
	require.True(t, ok, "docs/reference.md has a Configuration keys section")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(line, "|") {
			rows = append(rows, cells[1])
		}
	}
	documented := func(table, key string) bool {
		for _, cell := range rows {
			if table == "" {
				if strings.Contains(cell, "`"+key+"`") {
					return true
				}
				continue
			}
			if strings.Contains(cell, "`"+table+" "+key+"`") ||
				(strings.Contains(cell, "`"+table) && strings.Contains(cell, "`"+key+"`")) {
				return true
			}
		}
		return false
	}
	var missing []string
	var walk func(table string, typ reflect.Type)
	walk = func(table string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}):
				walk("["+strings.TrimPrefix(strings.Trim(table, "[]")+"."+name, ".")+"]", ft)
				continue
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk("[["+strings.TrimPrefix(strings.Trim(table, "[]")+"."+name, ".")+"]]", ft.Elem())
				continue
			case ft.Kind() == reflect.Map:
				if !documented("", strings.Trim(table, "[]")+"."+name) && !documented("", "["+strings.Trim(table, "[]")+"."+name+"]") {
					missing = append(missing, table+" "+name)
				}
				continue
			}
			if !documented(table, name) {
				missing = append(missing, strings.TrimSpace(table+" "+name))
			}
		}
	}
	walk("", reflect.TypeOf(Config{}))
	require.Empty(t, missing, "config keys without a row in docs/reference.md's Configuration keys")
}
