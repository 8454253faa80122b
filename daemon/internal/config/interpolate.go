package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Interpolate expands ${VAR} and ${VAR:-default} in s. "$${" is a literal "${".
func Interpolate(s string, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	const escaped = "\x00escaped-dollar\x00"
	s = strings.ReplaceAll(s, "$${", escaped)
	var missing []string
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRE.FindStringSubmatch(m)
		if v, ok := lookupEnv(sub[1]); ok && (v != "" || sub[2] == "") {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a fallback)", missing[0], missing[0])
	}
	if strings.Contains(out, "${") {
		return "", fmt.Errorf("malformed ${...} in %q", s)
	}
	return strings.ReplaceAll(out, escaped, "${"), nil
}

var durationType = reflect.TypeOf(Duration{})

// interpolateAll walks every string in the decoded config, including the
// opaque plugin config maps, and expands ${VAR}.
func interpolateAll(v reflect.Value, key string, env func(string) (string, bool), r *reporter) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == durationType {
			d := v.Addr().Interface().(*Duration)
			if s, err := Interpolate(d.raw, env); err != nil {
				r.at(key, "%v", err)
			} else {
				d.raw = s
			}
			return
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if !f.IsExported() || tag == "-" {
				continue
			}
			interpolateAll(v.Field(i), joinKey(key, tag), env, r)
		}
	case reflect.String:
		if r.skipSecrets && strings.HasSuffix(key, "_file") {
			return
		}
		s, err := Interpolate(v.String(), env)
		if err != nil {
			r.at(key, "%v", err)
			return
		}
		v.SetString(s)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			interpolateAll(v.Index(i), fmt.Sprintf("%s.%d", key, i), env, r)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			elem := v.MapIndex(k)
			sub := joinKey(key, fmt.Sprint(k.Interface()))
			if elem.Kind() == reflect.Interface {
				elem = elem.Elem()
			}
			switch elem.Kind() {
			case reflect.String:
				if r.skipSecrets && strings.HasSuffix(sub, "_file") {
					continue
				}
				s, err := Interpolate(elem.String(), env)
				if err != nil {
					r.at(sub, "%v", err)
					continue
				}
				v.SetMapIndex(k, reflect.ValueOf(s))
			case reflect.Map, reflect.Slice:
				if elem.Kind() == reflect.Slice {
					cp := reflect.MakeSlice(elem.Type(), elem.Len(), elem.Len())
					reflect.Copy(cp, elem)
					for i := 0; i < cp.Len(); i++ {
						item := cp.Index(i)
						if item.Kind() == reflect.Interface && item.Elem().Kind() == reflect.String {
							s, err := Interpolate(item.Elem().String(), env)
							if err != nil {
								r.at(fmt.Sprintf("%s.%d", sub, i), "%v", err)
								continue
							}
							item.Set(reflect.ValueOf(s))
						} else {
							interpolateAll(item, fmt.Sprintf("%s.%d", sub, i), env, r)
						}
					}
					v.SetMapIndex(k, cp)
				} else {
					interpolateAll(elem, sub, env, r)
				}
			}
		}
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			interpolateAll(v.Elem(), key, env, r)
		}
	}
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}
