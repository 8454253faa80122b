package console

import "encoding/json"

func jsonInto(raw []byte, out any) bool { return json.Unmarshal(raw, out) == nil }
