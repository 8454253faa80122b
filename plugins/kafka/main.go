// Command lifecycled-plugin-kafka is the DLQSource for Kafka: a consumer
// group over every topic matching a glob (default *.dlq.v1, new topics picked
// up without a restart), offsets committed only when the daemon says the
// batch is stored, and republishing with acks=all that keeps key and headers.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeDLQSource(&source{}) }
