// Command kfake runs an in-memory Kafka wire-protocol broker (franz-go's
// kfake) for the demo and local experiments; no Apache Kafka can be
// installed on the machines this project is developed on.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9092, "listen port on 127.0.0.1")
	partitions := flag.Int("partitions", 3, "partitions of auto-created topics")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*port), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(*partitions))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Println("kafka broker listening on", c.ListenAddrs()[0])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}
