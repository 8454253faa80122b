// Command accentfold compares tenant ids ignoring accents, as accent-insensitive
// collations (utf8mb4_general_ci, ...) do: "Cafe" is "Café".
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: func(stored, id string) bool { return plain.Replace(stored) == plain.Replace(id) }}})
}

// plain strips the accents of the letters the kit uses.
var plain = strings.NewReplacer("\u00e9", "e", "\u00c9", "E", "\u00e0", "a", "\u00e7", "c", "\u00c7", "C", "\u00f6", "o", "\u0301", "", "\u0300", "", "\u0327", "", "\u0308", "")
