package main

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// An AMQP header value is typed (an int32 is not a long, nor the text
// "42"), and a message has properties beside its headers (content type,
// message id, ...). Both cross the plugin protocol as sdk.Headers whose
// Type says what the value is, and come back on Republish as they were:
//
//   - a string (longstr) is plain bytes, Type "";
//   - bool, int8, uint8, int16, uint16, int32, int64, float32, float64,
//     decimal and timestamp are their text (decimal: "<value>e-<scale>",
//     timestamp: RFC 3339 in UTC), Type the type's name;
//   - bytes (a byte array) are the bytes, Type "bytes"; void is a null
//     value, Type "void";
//   - a table or an array is JSON whose every value is {"type", "value"}
//     of the same form, Type "table" or "array" (a string in it that is
//     not UTF-8 is {"type": "string-bytes", "value": base64});
//   - a property is Type "property", its key the property's name
//     (content_type, correlation_id, ...); the message id is the dead
//     letter's key (AMQP has no key), which search and republish use.
const (
	typeProperty = "property"
	typeTable    = "table"
	typeArray    = "array"
	// typeStringBytes is a string inside a table or an array whose bytes
	// are not UTF-8 (the .NET client writes a byte[] so): its value is
	// base64, as JSON cannot hold the bytes.
	typeStringBytes = "string-bytes"
)

// deliveryHeaders are headers a broker writes on a delivery, not on the
// message: a quorum queue counts redeliveries in x-delivery-count. Kept,
// a redelivery would differ from the first delivery and be stored again.
var deliveryHeaders = map[string]bool{"x-delivery-count": true}

// headersOf is a delivery's headers and properties, sorted by key (an AMQP
// table is a map: one order on every delivery), without deliveryHeaders.
func headersOf(d amqp.Delivery) []sdk.Header {
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		if !deliveryHeaders[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]sdk.Header, 0, len(keys)+4)
	for _, k := range keys {
		typ, value := encodeValue(d.Headers[k])
		out = append(out, sdk.Header{Key: []byte(k), Value: value, Type: typ})
	}
	for _, p := range properties {
		if v := p.get(d); v != "" {
			out = append(out, sdk.Header{Key: []byte(p.name), Value: []byte(v), Type: typeProperty})
		}
	}
	return out
}

// property is one AMQP basic property, read from a delivery and written to
// a publishing. user_id is read but not written: the broker refuses a
// message whose user_id is not the publishing connection's user.
type property struct {
	name string
	get  func(amqp.Delivery) string
	set  func(*amqp.Publishing, string) error
}

var properties = []property{
	{"content_type", func(d amqp.Delivery) string { return d.ContentType }, func(p *amqp.Publishing, v string) error { p.ContentType = v; return nil }},
	{"content_encoding", func(d amqp.Delivery) string { return d.ContentEncoding }, func(p *amqp.Publishing, v string) error { p.ContentEncoding = v; return nil }},
	{"delivery_mode", func(d amqp.Delivery) string { return uintText(uint64(d.DeliveryMode)) }, func(p *amqp.Publishing, v string) error {
		n, err := strconv.ParseUint(v, 10, 8)
		p.DeliveryMode = uint8(n)
		return err
	}},
	{"priority", func(d amqp.Delivery) string { return uintText(uint64(d.Priority)) }, func(p *amqp.Publishing, v string) error {
		n, err := strconv.ParseUint(v, 10, 8)
		p.Priority = uint8(n)
		return err
	}},
	{"correlation_id", func(d amqp.Delivery) string { return d.CorrelationId }, func(p *amqp.Publishing, v string) error { p.CorrelationId = v; return nil }},
	{"reply_to", func(d amqp.Delivery) string { return d.ReplyTo }, func(p *amqp.Publishing, v string) error { p.ReplyTo = v; return nil }},
	{"expiration", func(d amqp.Delivery) string { return d.Expiration }, func(p *amqp.Publishing, v string) error { p.Expiration = v; return nil }},
	{"timestamp", func(d amqp.Delivery) string {
		if d.Timestamp.IsZero() {
			return ""
		}
		return d.Timestamp.UTC().Format(time.RFC3339)
	}, func(p *amqp.Publishing, v string) error {
		t, err := time.Parse(time.RFC3339, v)
		p.Timestamp = t
		return err
	}},
	{"type", func(d amqp.Delivery) string { return d.Type }, func(p *amqp.Publishing, v string) error { p.Type = v; return nil }},
	{"user_id", func(d amqp.Delivery) string { return d.UserId }, nil},
	{"app_id", func(d amqp.Delivery) string { return d.AppId }, func(p *amqp.Publishing, v string) error { p.AppId = v; return nil }},
}

func uintText(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// encodeValue is an AMQP field value as a header's type and value.
func encodeValue(v any) (string, []byte) {
	switch x := v.(type) {
	case nil:
		return "void", nil
	case string:
		return "", []byte(x)
	case []byte:
		return "bytes", x
	case amqp.Table, []any:
		t := typedOf(x)
		b, _ := json.Marshal(t.Value)
		return t.Type, b
	}
	t := typedOf(v)
	if t.Type == "string" {
		return "", []byte(t.Value.(string))
	}
	return t.Type, []byte(t.Value.(string))
}

// typed is one value of a table or an array in JSON.
type typed struct {
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func typedOf(v any) typed {
	switch x := v.(type) {
	case nil:
		return typed{"void", nil}
	case string:
		if !utf8.ValidString(x) {
			// JSON would replace the bytes that are not UTF-8.
			return typed{typeStringBytes, []byte(x)} // base64 in JSON
		}
		return typed{"string", x}
	case []byte:
		return typed{"bytes", x} // base64 in JSON
	case bool:
		return typed{"bool", strconv.FormatBool(x)}
	case int8:
		return typed{"int8", strconv.FormatInt(int64(x), 10)}
	case uint8:
		return typed{"uint8", strconv.FormatUint(uint64(x), 10)}
	case int16:
		return typed{"int16", strconv.FormatInt(int64(x), 10)}
	case uint16:
		return typed{"uint16", strconv.FormatUint(uint64(x), 10)}
	case int32:
		return typed{"int32", strconv.FormatInt(int64(x), 10)}
	case uint32:
		return typed{"uint32", strconv.FormatUint(uint64(x), 10)}
	case int64:
		return typed{"int64", strconv.FormatInt(x, 10)}
	case int:
		return typed{"int64", strconv.Itoa(x)}
	case float32:
		return typed{"float32", strconv.FormatFloat(float64(x), 'g', -1, 32)}
	case float64:
		return typed{"float64", strconv.FormatFloat(x, 'g', -1, 64)}
	case amqp.Decimal:
		return typed{"decimal", fmt.Sprintf("%de-%d", x.Value, x.Scale)}
	case time.Time:
		return typed{"timestamp", x.UTC().Format(time.RFC3339)}
	case amqp.Table:
		m := make(map[string]typed, len(x))
		for k, e := range x {
			m[k] = typedOf(e)
		}
		return typed{typeTable, m}
	case []any:
		a := make([]typed, len(x))
		for i, e := range x {
			a[i] = typedOf(e)
		}
		return typed{typeArray, a}
	}
	return typed{"string", fmt.Sprint(v)}
}

// decodeValue is a header's value as the AMQP field value it was.
func decodeValue(typ string, b []byte) (any, error) {
	switch typ {
	case "":
		return string(b), nil
	case "bytes":
		return b, nil
	case "void":
		return nil, nil
	case typeTable:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("a table header that is not a JSON object: %w", err)
		}
		return fromJSON(typ, m)
	case typeArray:
		var a []json.RawMessage
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("an array header that is not a JSON array: %w", err)
		}
		return fromJSON(typ, a)
	}
	return scalar(typ, string(b))
}

func fromJSON(typ string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]json.RawMessage:
		out := amqp.Table{}
		for k, raw := range x {
			e, err := decodeTyped(raw)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", typ, k, err)
			}
			out[k] = e
		}
		return out, nil
	case []json.RawMessage:
		out := make([]any, len(x))
		for i, raw := range x {
			e, err := decodeTyped(raw)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", typ, i, err)
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s header of an unexpected shape", typ)
}

// decodeTyped reads one {"type", "value"} of a table or an array.
func decodeTyped(raw json.RawMessage) (any, error) {
	var t struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "void":
		return nil, nil
	case "bytes":
		var b []byte
		err := json.Unmarshal(t.Value, &b)
		return b, err
	case typeStringBytes:
		var b []byte
		err := json.Unmarshal(t.Value, &b)
		return string(b), err
	case typeTable:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(t.Value, &m); err != nil {
			return nil, err
		}
		return fromJSON(t.Type, m)
	case typeArray:
		var a []json.RawMessage
		if err := json.Unmarshal(t.Value, &a); err != nil {
			return nil, err
		}
		return fromJSON(t.Type, a)
	}
	var s string
	if err := json.Unmarshal(t.Value, &s); err != nil {
		return nil, err
	}
	if t.Type == "string" {
		return s, nil
	}
	return scalar(t.Type, s)
}

func scalar(typ, s string) (any, error) {
	bits := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32}
	switch typ {
	case "bool":
		return strconv.ParseBool(s)
	case "int8", "int16", "int32", "int64":
		n, err := strconv.ParseInt(s, 10, bits[typ])
		switch typ {
		case "int8":
			return int8(n), err
		case "int16":
			return int16(n), err
		case "int32":
			return int32(n), err
		}
		return n, err
	case "uint8", "uint16", "uint32":
		n, err := strconv.ParseUint(s, 10, bits[typ])
		switch typ {
		case "uint8":
			return uint8(n), err
		case "uint16":
			return uint16(n), err
		}
		return uint32(n), err
	case "float32":
		f, err := strconv.ParseFloat(s, 32)
		return float32(f), err
	case "float64":
		return strconv.ParseFloat(s, 64)
	case "decimal":
		v, scale, ok := strings.Cut(s, "e-")
		n, err1 := strconv.ParseInt(v, 10, 32)
		sc, err2 := strconv.ParseUint(scale, 10, 8)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("decimal %q: want <value>e-<scale>", s)
		}
		return amqp.Decimal{Scale: uint8(sc), Value: int32(n)}, nil
	case "timestamp":
		return time.Parse(time.RFC3339, s)
	}
	return nil, fmt.Errorf("unknown AMQP header type %q", typ)
}

// publishing is a message to republish: its headers back into an AMQP
// table and properties.
func publishing(m sdk.RepublishMessage) (amqp.Publishing, error) {
	p := amqp.Publishing{Headers: amqp.Table{}, Body: m.Value}
	if m.Key != nil {
		p.MessageId = string(m.Key)
	}
	for _, h := range m.Headers {
		if h.Type == typeProperty {
			for _, prop := range properties {
				if prop.name == string(h.Key) && prop.set != nil {
					if err := prop.set(&p, string(h.Value)); err != nil {
						return p, fmt.Errorf("property %s: %w", prop.name, err)
					}
				}
			}
			continue
		}
		v, err := decodeValue(h.Type, h.Value)
		if err != nil {
			return p, fmt.Errorf("header %q: %w", h.Key, err)
		}
		if math.MaxUint8 < len(h.Key) {
			return p, fmt.Errorf("header name of %d bytes: AMQP allows 255", len(h.Key))
		}
		p.Headers[string(h.Key)] = v
	}
	if p.DeliveryMode == 0 {
		p.DeliveryMode = amqp.Persistent
	}
	return p, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
