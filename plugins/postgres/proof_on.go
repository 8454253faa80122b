//go:build !lifecycled_noproof

package main

// proofEnabled: Delete records and checks the identities of what it
// deletes. Only a benchmark build (-tags lifecycled_noproof, bench/) turns
// it off, to measure what the proof costs beside the deletion.
const proofEnabled = true
