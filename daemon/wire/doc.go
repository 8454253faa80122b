// Package wire holds the admin API's JSON: every request body and answer
// of the routes in docs/reference.md, the error envelope and the time
// format. The server (adminapi) renders into these types and the typed
// client (adminclient) decodes from them, so the CLI, the console and the
// tests read exactly what the server writes without linking the server.
//
// The types hold data and the rules of their own encoding only (a
// Base64Field's null versus absent); how a domain object becomes one is
// the server's business.
package wire
