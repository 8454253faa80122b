// Command prefix takes every tenant whose id starts with the requested one (a key
// pattern with nothing after the id): tenant A reaches tenant "A:x".
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: strings.HasPrefix}})
}
