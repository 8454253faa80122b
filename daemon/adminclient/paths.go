package adminclient

import "net/url"

// APIPrefix starts every path of the API but the health routes.
const APIPrefix = "/api/v1/"

// The paths of the routes: what adminapi registers, built from their
// parameters (each escaped).
const (
	pathHealthz    = "/healthz"
	pathReadyz     = "/readyz"
	pathMetrics    = "/metrics"
	pathVersion    = APIPrefix + "version"
	pathStatus     = APIPrefix + "status"
	pathPlugins    = APIPrefix + "plugins"
	pathReload     = APIPrefix + "reload"
	pathArchive    = APIPrefix + "archive"
	pathArchiveRun = APIPrefix + "archive/run"
	pathDeletions  = APIPrefix + "deletions"
	pathHolds      = APIPrefix + "holds"
	pathReceiptKey = APIPrefix + "receipts/key"
	pathLedger     = APIPrefix + "erasures/ledger"
	pathReverify   = APIPrefix + "erasures/reverify"
	pathDLQ        = APIPrefix + "dlq"
	pathSearch     = APIPrefix + "dlq/messages"
	pathGroups     = APIPrefix + "dlq/groups"
	pathOperations = APIPrefix + "dlq/operations"
)

// tenantPath is /api/v1/tenants/{tenant} followed by suffix.
func tenantPath(tenant, suffix string) string {
	return APIPrefix + "tenants/" + url.PathEscape(tenant) + suffix
}

// messagePath is /api/v1/dlq/messages/{id} followed by suffix.
func messagePath(id, suffix string) string {
	return pathSearch + "/" + url.PathEscape(id) + suffix
}

// topicPath is /api/v1/dlq/{topic} followed by suffix.
func topicPath(topic, suffix string) string {
	return pathDLQ + "/" + url.PathEscape(topic) + suffix
}

// topicListPath is /api/v1/dlq/topics/{topic}, the list of a topic's
// messages: /api/v1/dlq/{topic} serves the same list, except for a topic
// named messages, groups or operations, or starting topics/, whose names
// are routes of their own there.
func topicListPath(topic string) string {
	return pathDLQ + "/topics/" + url.PathEscape(topic)
}

// operationPath is /api/v1/dlq/operations/{id} followed by suffix.
func operationPath(id, suffix string) string {
	return pathOperations + "/" + url.PathEscape(id) + suffix
}

func dryRunQuery(dryRun bool) url.Values {
	if !dryRun {
		return nil
	}
	return url.Values{"dry_run": {"true"}}
}
