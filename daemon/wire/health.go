package wire

type HealthCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Took   string `json:"took"`
}

type Health struct {
	Status string        `json:"status"`
	Checks []HealthCheck `json:"checks,omitempty"`
}
