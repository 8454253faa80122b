// Command numeric compares tenant ids that are numbers by value, as a numeric key does:
// "04" and "4.0" are tenant 4.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: kvdeleter.Numeric}})
}
