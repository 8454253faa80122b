package adminapi

import (
	"io"
	"net/http"
)

// What a mutating route takes is all it takes: a query parameter or a
// body it does not read would be ignored, and an operator who wrote
// `?dry_run=true` on a route that has no dry run, or sent
// {"dry_run": true} to one that reads no body, would get the real thing.

// bodyRule says whether a route reads a request body.
type bodyRule bool

const (
	bodyAllowed bodyRule = false // the route reads its body itself (strictly)
	noBody      bodyRule = true  // any body is refused
)

// strictRequest refuses query parameters other than params and, for a
// route with noBody, a body that is not empty (spaces only is empty).
func strictRequest(r *http.Request, body bodyRule, params ...string) error {
	if err := onlyParams(r.URL.Query(), params...); err != nil {
		return err
	}
	if body == noBody {
		return emptyBody(r)
	}
	return nil
}

// readBody reads a request body; nil when it is empty (or JSON whitespace only).
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, invalid("cannot read the request body: %v", err)
	}
	if blankJSON(data) {
		return nil, nil
	}
	return data, nil
}

// emptyBody refuses a body where none is documented.
func emptyBody(r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if data != nil {
		return invalid("the body must be empty")
	}
	return nil
}
