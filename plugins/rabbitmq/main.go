// Command lifecycled-plugin-rabbitmq is the DLQSource for RabbitMQ: it
// consumes dead-letter queues with manual acknowledgements, acknowledging a
// message only when the daemon stored it; reads where a message failed
// from the x-death header RabbitMQ writes (and Spring AMQP's
// RepublishMessageRecoverer headers); and republishes to the original
// exchange and routing key with publisher confirms and mandatory routing,
// keeping the headers' AMQP types and the message's properties.
//
// RabbitMQ gives a message no id that survives a redelivery, so every
// delivery has a position of its own (sdk.PositionsPerDelivery) and a
// redelivery is flagged by the broker; docs/plugins.md has the details.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeDLQSource(newSource()) }
