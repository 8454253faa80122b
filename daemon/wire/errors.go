package wire

// ErrorBody is the envelope of every non-2xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Details   []any  `json:"details"`
}

// FieldProblem is one entry of details for a validation error.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}
