//go:build lifecycled_noproof

package main

// proofEnabled is off in this benchmark build: Delete records no
// identities and checks none (see proof_on.go). Never ship it.
const proofEnabled = false
