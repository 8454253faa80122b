package plugintest

import "testing"

// DeleterFixture seeds and inspects the real store behind a TenantDeleter.
// It must use the store's own client, not the plugin, to check results.
//
// A fixture may also implement the optional interfaces below; each gives
// the kit more to check, and the kit says (as a skipped subtest) what it
// could not check without them:
//
//   - DeleterChecksummer (recommended): bystanders are compared by content,
//     not only by count.
//   - DistinctTenantIDs: which ids the store keeps apart.
//   - StoreOutage: the store can be stopped and started, for the error
//     class of a store that is down and the partial count of a Delete it
//     interrupts.
//   - UnreachableStore: a config pointing at a store that cannot be
//     reached, for Configure's error class and the field it names.
//   - FailureInjector: a failure part way through a Delete other than the
//     whole store going down.
//   - SecretHolder: secrets the plugin obtains at run time.
//
// Proxy makes StoreOutage and FailureInjector easy for any store reached
// over TCP.
type DeleterFixture interface {
	// Config is the plugin config block pointing at the test store. Put a
	// password in it (a DSN with one is enough) where the store takes one,
	// even an unused one: the kit checks it never appears in an error or a
	// log line.
	Config(t testing.TB) map[string]any
	// Seed creates n items of the tenant's data and returns how many items
	// Delete will count for it (n, or more when one unit spans several rows).
	Seed(t testing.TB, tenant string, n int) int64
	// Remaining counts the tenant's items in the store directly.
	Remaining(t testing.TB, tenant string) int64
}

// DeleterChecksummer is optional for a DeleterFixture.
type DeleterChecksummer interface {
	// Checksum returns a hash over every item of the tenant, content
	// included, read with the store's own client: any change to any of the
	// tenant's items (deleted, added, modified) must change it.
	Checksum(t testing.TB, tenant string) string
}

// DistinctTenantIDs is optional for a DeleterFixture whose store cannot keep
// every id apart: a uuid column folds "A1..." into "a1...", a numeric key
// folds "04" into "4", and neither stores " 4".
type DistinctTenantIDs interface {
	// StoresDistinct reports whether the store keeps id as a tenant of its
	// own, apart from every other id; the kit seeds bystander tenants only
	// where it does.
	StoresDistinct(id string) bool
}

// StoreOutage is optional for a DeleterFixture: it takes the store away
// and brings it back with its data. With it the kit checks that Count and
// Delete fail with a retryable error while the store is down (a plugin that
// answers 0 would let the daemon call a tenant erased whose data is all
// there), that the plugin works again once the store is back, and, unless
// the fixture is also a FailureInjector, that a Delete the outage
// interrupts reports how much it deleted.
type StoreOutage interface {
	// StopStore makes the store unreachable: established connections break
	// and new ones are refused (Proxy.Stop does this for a TCP store).
	StopStore(t testing.TB)
	// StartStore makes it reachable again, with the data it had.
	StartStore(t testing.TB)
}

// UnreachableStore is optional for a DeleterFixture. Configure with the
// config it returns must fail with a retryable error (the daemon starts the
// plugin again later; a permanent error would need an operator for a
// store that was merely down) that names field, the key pointing at the
// store, in its message or its field problems.
type UnreachableStore interface {
	// UnreachableConfig is a valid config whose store cannot be reached (a
	// port nothing listens on), and the key that says where the store is.
	// Give it a password (in the DSN, or the password key): the kit checks
	// that it appears in no error or log line.
	UnreachableConfig(t testing.TB) (config map[string]any, field string)
}

// FailureInjector is optional for a DeleterFixture. The kit calls
// FailMidDelete from the first progress report of a long Delete; from then
// on the store must fail the plugin's requests (a cut connection, a killed
// session) until restore is called. The Delete must fail with a retryable
// error whose partial count (sdk.PartialDeletion) is at least the progress
// it reported and at most what the store lost. Without it, a StoreOutage
// fixture's StopStore is the failure.
type FailureInjector interface {
	FailMidDelete(t testing.TB) (restore func())
}

// Settler is optional for a DeleterFixture that is a StoreOutage or a
// FailureInjector. After a Delete the failure interrupted, the kit calls
// Settle before it counts what the store lost: Settle returns once the
// store has run to their end the statements the plugin sent before the
// failure (a statement a server was running when its client's connection
// broke may still commit). Without it the kit waits until the tenant's
// count stops changing for a second, which a long statement on a loaded
// machine can outlast; the Delete's partial count then looks wrong.
type Settler interface {
	Settle(t testing.TB)
}

// SecretHolder is optional for a DeleterFixture: secrets the plugin holds
// that are not in its config (a session token the store hands out, a
// password read from elsewhere). The kit checks that none appears in an
// error or a log line; secrets from the configs it sends it finds itself.
type SecretHolder interface {
	Secrets(t testing.TB) []string
}
