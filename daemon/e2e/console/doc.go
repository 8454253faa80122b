// Package console holds the web console's end-to-end tests: the real daemon
// with its plugins, the Kafka broker and the state store, `lifecycled ui`
// as an operator runs it, and a real headless Chromium (Debian's chromium,
// installed by `make test-deps`) driven with chromedp through the URL the
// command prints. One browser serves the whole package; each test has its
// own browser context (its own cookies), so tests run in parallel.
package console
