package wire

// SearchResult is GET /api/v1/dlq/messages.
type SearchResult struct {
	Messages []Message `json:"messages"`
	// NextCursor continues the search; "" on the last page.
	NextCursor      string `json:"next_cursor"`
	Total           int64  `json:"total"`
	TotalIsEstimate bool   `json:"total_is_estimate"`
}

// Group is one failure group of GET /api/v1/dlq/groups.
type Group struct {
	ID               string           `json:"id"`
	Pattern          string           `json:"pattern"`
	ExceptionClass   *string          `json:"exception_class"`
	ErrorGroup       string           `json:"error_group"`
	Groups           []string         `json:"groups"`
	ExceptionClasses []string         `json:"exception_classes"`
	SampleError      string           `json:"sample_error"`
	OriginalTopics   []string         `json:"original_topics"`
	DLQTopics        []string         `json:"dlq_topics"`
	Counts           map[string]int64 `json:"counts"`
	FirstSeen        string           `json:"first_seen"`
	LastSeen         string           `json:"last_seen"`
	// ArrivalsPerHour are its live messages taken in per hour, oldest
	// first, over the 24 hours that end with the current one, the first
	// starting at ArrivalsSince.
	ArrivalsSince   string  `json:"arrivals_since"`
	ArrivalsPerHour []int64 `json:"arrivals_per_hour"`
}

// Groups is GET /api/v1/dlq/groups.
type Groups struct {
	Groups []Group `json:"groups"`
}
