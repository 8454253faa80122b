// Command unicodefold compares tenant ids after composing decomposed accents (NFD to
// NFC), as a normalising store or library does: "Cafe\u0301" is "Café".
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: func(stored, id string) bool { return nfc.Replace(stored) == nfc.Replace(id) }}})
}

// nfc composes the decomposed letters the kit uses.
var nfc = strings.NewReplacer("e\u0301", "\u00e9", "E\u0301", "\u00c9", "a\u0300", "\u00e0", "c\u0327", "\u00e7", "C\u0327", "\u00c7", "o\u0308", "\u00f6")
