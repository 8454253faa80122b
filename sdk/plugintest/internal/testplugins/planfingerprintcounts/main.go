// Command planfingerprintcounts plans wrongly: its plan's fingerprint hashes the counts too, so it differs between tenants and changes with the data.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{PlanFingerprintCounts: true}})
}
