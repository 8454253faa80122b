package app

import "go.uber.org/fx"

// modules returns the fx options of the daemon's jobs. Each contributes
// admin routes (group "admin_routes") and readiness checks (group
// "ready_checks") and registers its background loops with the lifecycle.
func modules() fx.Option {
	return fx.Options()
}
