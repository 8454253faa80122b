package dlq

import (
	"testing"
)

// corpus is realistic error text as consumers put it into dead-letter
// headers (Spring Kafka, Kafka Connect, Go services, PostgreSQL drivers,
// HTTP clients), with the grouping an operator expects: entries with the
// same group label must share a group id, and entries with different
// labels must not. pattern is the exact normalised text.
var corpus = []struct {
	group, topic, class, err, pattern string
}{
	// Spring / Jackson deserialisation failures.
	{"jackson-int", "orders.events.v1", "org.springframework.kafka.support.serializer.DeserializationException",
		`failed to deserialize; nested exception is com.fasterxml.jackson.databind.exc.InvalidFormatException: Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "abc": not a valid Integer value at [Source: (byte[])"{"qty":"abc"}"; line: 1, column: 9]`,
		`failed to deserialize; nested exception is com.fasterxml.jackson.databind.exc.InvalidFormatException: Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "<v>": not a valid Integer value at [Source: (byte[])"<v>"; line: <n>, column: <n>]`},
	{"jackson-int", "orders.events.v1", "org.springframework.kafka.support.serializer.DeserializationException",
		`failed to deserialize; nested exception is com.fasterxml.jackson.databind.exc.InvalidFormatException: Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "12x": not a valid Integer value at [Source: (byte[])"{"qty":"12x"}"; line: 1, column: 17]`,
		`failed to deserialize; nested exception is com.fasterxml.jackson.databind.exc.InvalidFormatException: Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "<v>": not a valid Integer value at [Source: (byte[])"<v>"; line: <n>, column: <n>]`},
	{"jackson-unrecognized", "orders.events.v1", "com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException",
		`Unrecognized field "customerId" (class com.acme.orders.OrderCreated), not marked as ignorable (4 known properties: "id", "items", "total", "currency"])`,
		`Unrecognized field "<v>" (class com.acme.orders.OrderCreated), not marked as ignorable (<n> known properties: "<v>", "<v>", "<v>", "<v>"])`},
	{"jackson-unrecognized", "orders.events.v1", "com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException",
		`Unrecognized field "coupon" (class com.acme.orders.OrderCreated), not marked as ignorable (4 known properties: "id", "items", "total", "currency"])`,
		`Unrecognized field "<v>" (class com.acme.orders.OrderCreated), not marked as ignorable (<n> known properties: "<v>", "<v>", "<v>", "<v>"])`},
	// Same text, another topic: another group.
	{"jackson-unrecognized-payments", "payments.events.v1", "com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException",
		`Unrecognized field "coupon" (class com.acme.orders.OrderCreated), not marked as ignorable (4 known properties: "id", "items", "total", "currency"])`,
		`Unrecognized field "<v>" (class com.acme.orders.OrderCreated), not marked as ignorable (<n> known properties: "<v>", "<v>", "<v>", "<v>"])`},
	{"spring-listener-npe", "orders.events.v1", "org.springframework.kafka.listener.ListenerExecutionFailedException",
		`Listener method 'public void com.acme.orders.OrderListener.onMessage(com.acme.orders.OrderCreated)' threw exception; nested exception is java.lang.NullPointerException: Cannot invoke "com.acme.orders.Customer.getId()" because "order.customer" is null`,
		`Listener method '<v>' threw exception; nested exception is java.lang.NullPointerException: Cannot invoke "<v>" because "<v>" is null`},
	{"spring-listener-npe", "orders.events.v1", "org.springframework.kafka.listener.ListenerExecutionFailedException",
		`Listener method 'public void com.acme.orders.OrderListener.onMessage(com.acme.orders.OrderCreated)' threw exception; nested exception is java.lang.NullPointerException: Cannot invoke "com.acme.orders.Customer.getId()" because "event.customer" is null`,
		`Listener method '<v>' threw exception; nested exception is java.lang.NullPointerException: Cannot invoke "<v>" because "<v>" is null`},
	// Same message, another exception class: another group.
	{"spring-conversion", "orders.events.v1", "org.springframework.messaging.converter.MessageConversionException",
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={"id":42}, headers={kafka_offset=1234, kafka_receivedPartitionId=3, id=6f1c2a84-8a4e-4d7b-9a51-0e6f3b1f2c7d, kafka_receivedTimestamp=1732615200000}]`,
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={<json>}, headers={kafka_offset=<n>, kafka_receivedPartitionId=<n>, id=<uuid>, kafka_receivedTimestamp=<n>}]`},
	{"spring-conversion", "orders.events.v1", "org.springframework.messaging.converter.MessageConversionException",
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={"id":7}, headers={kafka_offset=99, kafka_receivedPartitionId=0, id=0b5e8f0e-1d2c-4f4e-8d7f-3c2b1a098765, kafka_receivedTimestamp=1732615299999}]`,
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={<json>}, headers={kafka_offset=<n>, kafka_receivedPartitionId=<n>, id=<uuid>, kafka_receivedTimestamp=<n>}]`},
	{"spring-conversion-other-class", "orders.events.v1", "org.springframework.kafka.support.converter.ConversionException",
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={"id":7}, headers={kafka_offset=99, kafka_receivedPartitionId=0, id=0b5e8f0e-1d2c-4f4e-8d7f-3c2b1a098765, kafka_receivedTimestamp=1732615299999}]`,
		`Cannot convert from [java.lang.String] to [com.acme.orders.OrderCreated] for GenericMessage [payload={<json>}, headers={kafka_offset=<n>, kafka_receivedPartitionId=<n>, id=<uuid>, kafka_receivedTimestamp=<n>}]`},
	{"java-object-identity", "inventory.events.v1", "java.lang.IllegalStateException",
		`Stock reservation com.acme.inventory.Reservation@1b6d3586 already released`,
		`Stock reservation com.acme.inventory.Reservation@<hex> already released`},
	{"java-object-identity", "inventory.events.v1", "java.lang.IllegalStateException",
		`Stock reservation com.acme.inventory.Reservation@4554617c already released`,
		`Stock reservation com.acme.inventory.Reservation@<hex> already released`},
	{"java-timeout", "inventory.events.v1", "org.apache.kafka.common.errors.TimeoutException",
		`Expiring 12 record(s) for inventory.events.v1-3:120001 ms has passed since batch creation`,
		`Expiring <n> record(s) for inventory.events.v1-<n>:<n> ms has passed since batch creation`},
	{"java-timeout", "inventory.events.v1", "org.apache.kafka.common.errors.TimeoutException",
		`Expiring 1 record(s) for inventory.events.v1-0:120004 ms has passed since batch creation`,
		`Expiring <n> record(s) for inventory.events.v1-<n>:<n> ms has passed since batch creation`},

	// Kafka Connect.
	{"connect-converter", "crm.contacts.v1", "org.apache.kafka.connect.errors.DataException",
		`Converting byte[] to Kafka Connect data failed due to serialization error of topic crm.contacts.v1: `,
		`Converting byte[] to Kafka Connect data failed due to serialization error of topic crm.contacts.v1:`},
	{"connect-converter", "crm.contacts.v1", "org.apache.kafka.connect.errors.DataException",
		`Converting byte[] to Kafka Connect data failed due to serialization error of topic crm.contacts.v1:  `,
		`Converting byte[] to Kafka Connect data failed due to serialization error of topic crm.contacts.v1:`},
	{"connect-schema", "crm.contacts.v1", "org.apache.kafka.connect.errors.DataException",
		`Struct schemas do not match. Schema mismatch for field "email": expected STRING, got INT32 at offset 88123`,
		`Struct schemas do not match. Schema mismatch for field "<v>": expected STRING, got INT32 at offset <n>`},
	{"connect-schema", "crm.contacts.v1", "org.apache.kafka.connect.errors.DataException",
		`Struct schemas do not match. Schema mismatch for field "phone": expected STRING, got INT32 at offset 90001`,
		`Struct schemas do not match. Schema mismatch for field "<v>": expected STRING, got INT32 at offset <n>`},
	{"connect-jdbc-sink", "crm.contacts.v1", "org.apache.kafka.connect.errors.ConnectException",
		`java.sql.BatchUpdateException: Batch entry 0 INSERT INTO "contacts" ("id","email") VALUES (1842,'ann@example.com') was aborted: ERROR: duplicate key value violates unique constraint "contacts_email_key"`,
		`java.sql.BatchUpdateException: Batch entry <n> INSERT INTO "<v>" ("<v>","<v>") VALUES (<n>,'<v>') was aborted: ERROR: duplicate key value violates unique constraint "<v>"`},
	{"connect-jdbc-sink", "crm.contacts.v1", "org.apache.kafka.connect.errors.ConnectException",
		`java.sql.BatchUpdateException: Batch entry 3 INSERT INTO "contacts" ("id","email") VALUES (77,'bob@example.org') was aborted: ERROR: duplicate key value violates unique constraint "contacts_email_key"`,
		`java.sql.BatchUpdateException: Batch entry <n> INSERT INTO "<v>" ("<v>","<v>") VALUES (<n>,'<v>') was aborted: ERROR: duplicate key value violates unique constraint "<v>"`},
	{"connect-es", "crm.contacts.v1", "org.apache.kafka.connect.errors.ConnectException",
		`Bulk request failed: [{"type":"mapper_parsing_exception","reason":"failed to parse field [age] of type [long] in document with id 'contact-8812'"}]`,
		`Bulk request failed: [{<json>}]`},

	// Go services.
	{"go-dial", "billing.events.v1", "",
		`dial tcp 10.0.3.17:5432: connect: connection refused`,
		`dial tcp <ip>:<n>: connect: connection refused`},
	{"go-dial", "billing.events.v1", "",
		`dial tcp 10.0.3.18:5432: connect: connection refused`,
		`dial tcp <ip>:<n>: connect: connection refused`},
	{"go-iotimeout", "billing.events.v1", "",
		`read tcp 10.0.1.5:51234->10.0.2.9:9092: i/o timeout`,
		`read tcp <ip>:<n>-><ip>:<n>: i/o timeout`},
	{"go-iotimeout", "billing.events.v1", "",
		`read tcp 10.0.1.5:40002->10.0.2.11:9092: i/o timeout`,
		`read tcp <ip>:<n>-><ip>:<n>: i/o timeout`},
	{"go-json", "billing.events.v1", "",
		`json: cannot unmarshal string into Go struct field Invoice.amount of type float64`,
		`json: cannot unmarshal string into Go struct field Invoice.amount of type float64`},
	{"go-json-other-field", "billing.events.v1", "",
		`json: cannot unmarshal number into Go struct field Invoice.customer_id of type string`,
		`json: cannot unmarshal number into Go struct field Invoice.customer_id of type string`},
	{"go-deadline", "billing.events.v1", "",
		`charge invoice 88412: call payments: context deadline exceeded after 5.002s`,
		`charge invoice <n>: call payments: context deadline exceeded after <dur>`},
	{"go-deadline", "billing.events.v1", "",
		`charge invoice 90017: call payments: context deadline exceeded after 5.013s`,
		`charge invoice <n>: call payments: context deadline exceeded after <dur>`},
	{"go-notfound", "billing.events.v1", "",
		`customer cus_J8k2Lx9QaB not found in tenant 6f1c2a84-8a4e-4d7b-9a51-0e6f3b1f2c7d`,
		`customer <id> not found in tenant <uuid>`},
	{"go-notfound", "billing.events.v1", "",
		`customer cus_Q1w2E3r4T5 not found in tenant 9a1c2a84-0000-4d7b-9a51-0e6f3b1f2c7d`,
		`customer <id> not found in tenant <uuid>`},
	{"go-validation", "billing.events.v1", "",
		`validate invoice: field "currency": unsupported value 'XBT' (want one of EUR, USD, GBP)`,
		`validate invoice: field "<v>": unsupported value '<v>' (want one of EUR, USD, GBP)`},
	{"go-validation", "billing.events.v1", "",
		`validate invoice: field "currency": unsupported value 'DOGE' (want one of EUR, USD, GBP)`,
		`validate invoice: field "<v>": unsupported value '<v>' (want one of EUR, USD, GBP)`},
	{"go-email", "notifications.events.v1", "",
		`send mail to ann.lee+orders@example.co.uk: 550 5.1.1 mailbox unavailable`,
		`send mail to <email>: <n> <n>.<n> mailbox unavailable`},
	{"go-email", "notifications.events.v1", "",
		`send mail to BOB@EXAMPLE.COM: 550 5.1.1 mailbox unavailable`,
		`send mail to <email>: <n> <n>.<n> mailbox unavailable`},
	{"go-panic", "notifications.events.v1", "",
		`panic: runtime error: index out of range [3] with length 3`,
		`panic: runtime error: index out of range [<n>] with length <n>`},
	{"go-panic", "notifications.events.v1", "",
		`panic: runtime error: index out of range [12] with length 0`,
		`panic: runtime error: index out of range [<n>] with length <n>`},

	// PostgreSQL (pgx, lib/pq, JDBC).
	{"pg-unique", "orders.events.v1", "",
		`ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505) DETAIL: Key (id)=(48213) already exists.`,
		`ERROR: duplicate key value violates unique constraint "<v>" (SQLSTATE <n>) DETAIL: Key (id)=(<v>) already exists.`},
	{"pg-unique", "orders.events.v1", "",
		`ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505) DETAIL: Key (id)=(ord-2024-11-0042) already exists.`,
		`ERROR: duplicate key value violates unique constraint "<v>" (SQLSTATE <n>) DETAIL: Key (id)=(<v>) already exists.`},
	{"pg-fk", "orders.events.v1", "",
		`ERROR: insert or update on table "order_items" violates foreign key constraint "order_items_order_id_fkey" (SQLSTATE 23503)`,
		`ERROR: insert or update on table "<v>" violates foreign key constraint "<v>" (SQLSTATE <n>)`},
	{"pg-fk", "orders.events.v1", "",
		`ERROR: insert or update on table "order_lines" violates foreign key constraint "order_lines_sku_fkey" (SQLSTATE 23503)`,
		`ERROR: insert or update on table "<v>" violates foreign key constraint "<v>" (SQLSTATE <n>)`},
	{"pg-deadlock", "orders.events.v1", "",
		`pq: deadlock detected: Process 48211 waits for ShareLock on transaction 9918273; blocked by process 48190.`,
		`pq: deadlock detected: Process <n> waits for ShareLock on transaction <n>; blocked by process <n>.`},
	{"pg-deadlock", "orders.events.v1", "",
		`pq: deadlock detected: Process 50001 waits for ShareLock on transaction 9918499; blocked by process 50002.`,
		`pq: deadlock detected: Process <n> waits for ShareLock on transaction <n>; blocked by process <n>.`},
	{"pg-syntax", "orders.events.v1", "",
		`ERROR: invalid input syntax for type uuid: "not-a-uuid" (SQLSTATE 22P02)`,
		`ERROR: invalid input syntax for type uuid: "<v>" (SQLSTATE 22P02)`},
	{"pg-syntax", "orders.events.v1", "",
		`ERROR: invalid input syntax for type uuid: "1234" (SQLSTATE 22P02)`,
		`ERROR: invalid input syntax for type uuid: "<v>" (SQLSTATE 22P02)`},
	{"pg-cancel", "orders.events.v1", "",
		`ERROR: canceling statement due to statement timeout (SQLSTATE 57014) at 2024-11-26 10:08:20.123+00`,
		`ERROR: canceling statement due to statement timeout (SQLSTATE <n>) at <ts>`},
	{"pg-cancel", "orders.events.v1", "",
		`ERROR: canceling statement due to statement timeout (SQLSTATE 57014) at 2024-11-27 23:59:59.9+00`,
		`ERROR: canceling statement due to statement timeout (SQLSTATE <n>) at <ts>`},

	// HTTP calls with ids and timestamps.
	{"http-503", "shipping.events.v1", "",
		`POST https://carrier.example.com/v2/shipments/884213/labels: HTTP 503 Service Unavailable (request id 7f3e9c2a1b4d5e6f, at 2024-11-26T10:08:20Z)`,
		`POST https://carrier.example.com/v2/shipments/<n>/labels: HTTP 503 Service Unavailable (request id <hex>, at <ts>)`},
	{"http-503", "shipping.events.v1", "",
		`POST https://carrier.example.com/v2/shipments/884299/labels: HTTP 503 Service Unavailable (request id a9b8c7d6e5f40312, at 2024-11-26T10:09:01.554Z)`,
		`POST https://carrier.example.com/v2/shipments/<n>/labels: HTTP 503 Service Unavailable (request id <hex>, at <ts>)`},
	// Same call, another status: another group.
	{"http-404", "shipping.events.v1", "",
		`POST https://carrier.example.com/v2/shipments/884299/labels: HTTP 404 Not Found (request id a9b8c7d6e5f40312, at 2024-11-26T10:09:01.554Z)`,
		`POST https://carrier.example.com/v2/shipments/<n>/labels: HTTP 404 Not Found (request id <hex>, at <ts>)`},
	{"http-429", "shipping.events.v1", "",
		`unexpected status code: 429, retry after Tue, 26 Nov 2024 10:08:20 GMT`,
		`unexpected status code: 429, retry after <ts>`},
	{"http-429", "shipping.events.v1", "",
		`unexpected status code: 429, retry after Wed, 27 Nov 2024 00:00:01 GMT`,
		`unexpected status code: 429, retry after <ts>`},
	{"http-client-timeout", "shipping.events.v1", "",
		`Get "https://geo.example.com/v1/address?id=55812": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`,
		`Get "<v>": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`},
	{"http-client-timeout", "shipping.events.v1", "",
		`Get "https://geo.example.com/v1/address?id=90000": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`,
		`Get "<v>": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`},
	{"http-java", "shipping.events.v1", "org.springframework.web.client.HttpServerErrorException$BadGateway",
		`502 Bad Gateway: "<html><body>upstream 10.2.0.4:8080 timed out</body></html>"`,
		`<n> Bad Gateway: "<v>"`},
	{"http-java", "shipping.events.v1", "org.springframework.web.client.HttpServerErrorException$BadGateway",
		`502 Bad Gateway: "<html><body>upstream 10.2.0.5:8080 timed out</body></html>"`,
		`<n> Bad Gateway: "<v>"`},
	{"http-log-date", "shipping.events.v1", "",
		`webhook rejected at Thu Nov 26 10:08:20 UTC 2026: signature mismatch for delivery 0x1f4a`,
		`webhook rejected at <ts>: signature mismatch for delivery <hex>`},
	{"http-log-date", "shipping.events.v1", "",
		`webhook rejected at Fri Nov 27 07:00:00 UTC 2026: signature mismatch for delivery 0x2b`,
		`webhook rejected at <ts>: signature mismatch for delivery <hex>`},
	// Issue 27 case 6: common ids that split groups.
	{"ulid", "orders.events.v1", "",
		`order 01HZX3K8V7Q2M9TB4W6N0C5JRD not found in ledger`, `order <id> not found in ledger`},
	{"ulid", "orders.events.v1", "",
		`order 01J0A2B3C4D5E6F7G8H9JKMNPQ not found in ledger`, `order <id> not found in ledger`},
	{"pod", "orders.events.v1", "",
		`upstream orders-api-7d9f8b6c4-x2x9k refused the connection`, `upstream orders-api-<pod> refused the connection`},
	{"pod", "orders.events.v1", "",
		`upstream orders-api-5c4b79d8f9-qw8zt refused the connection`, `upstream orders-api-<pod> refused the connection`},
	{"pod", "orders.events.v1", "",
		`upstream orders-api-hx7q2 refused the connection`, `upstream orders-api-<pod> refused the connection`},
	{"pod-other-service", "orders.events.v1", "",
		`upstream billing-api-7d9f8b6c4-x2x9k refused the connection`, `upstream billing-api-<pod> refused the connection`},
	{"https-is-a-word", "orders.events.v1", "",
		`upstream my-https refused the connection`, `upstream my-https refused the connection`},
	{"token", "auth.events.v1", "",
		`token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired`, `token <token>.<token>.<token> expired`},
	{"token", "auth.events.v1", "",
		`token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI5ODc2NTQzMjEwIn0.Ab3dEf7hIj9kLm1nOp3qRs5tUv7wXy9zAb3dEf7hIj9 expired`, `token <token>.<token>.<token> expired`},
	{"token-opaque", "auth.events.v1", "",
		`token dGhpcyBpcyBhIHRva2VuIDEyMw== expired`, `token <token> expired`},
	{"short-hex", "builds.events.v1", "",
		`artifact a3f9c2e missing from cache`, `artifact <hex> missing from cache`},
	{"short-hex", "builds.events.v1", "",
		`artifact 9be04d1 missing from cache`, `artifact <hex> missing from cache`},
	{"short-hex", "builds.events.v1", "",
		`artifact 4f2a1 missing from cache`, `artifact <hex> missing from cache`},
	{"sci", "metrics.events.v1", "",
		`value -3.5e10 out of range for column amount`, `value <n> out of range for column amount`},
	{"sci", "metrics.events.v1", "",
		`value 1.2E+08 out of range for column amount`, `value <n> out of range for column amount`},
	{"sci", "metrics.events.v1", "",
		`value 42 out of range for column amount`, `value <n> out of range for column amount`},
	{"sci", "metrics.events.v1", "",
		`value 1,234,567.89 out of range for column amount`, `value <n> out of range for column amount`},
	{"sci", "metrics.events.v1", "",
		`value .5 out of range for column amount`, `value <n> out of range for column amount`},
	{"sci", "metrics.events.v1", "",
		`value +7 out of range for column amount`, `value <n> out of range for column amount`},
	// Words that look like ids stay words.
	{"words", "orders.events.v1", "",
		`OrderValidationException in decade facade: base64 utf8 sha256 e2e`, `OrderValidationException in decade facade: base64 utf8 sha256 e2e`},
	{"token-opaque", "auth.events.v1", "",
		`token Zm9vYmFyLTk4NzY1NDMyMTA= expired`, `token <token> expired`},
	// No error header at all.
	{"unknown", "shipping.events.v1", "", UnknownError, UnknownError},
}

func TestFailureGroupsOnACorpusOfRealErrors(t *testing.T) {
	if len(corpus) < 50 {
		t.Fatalf("the corpus has %d entries; it must have at least 50", len(corpus))
	}
	idOfLabel := map[string]string{}
	labelOfID := map[string]string{}
	for i, c := range corpus {
		g := FailureGroup(c.topic, c.class, c.err)
		if again := FailureGroup(c.topic, c.class, c.err); again != g {
			t.Errorf("entry %d: the cached group %+v differs from the computed %+v", i, again, g)
		}
		if direct := failureGroup(c.topic, c.err, c.class); direct != g {
			t.Errorf("entry %d: %+v computed, %+v from FailureGroup", i, direct, g)
		}
		if g.Pattern != c.pattern {
			t.Errorf("entry %d (%s): pattern\n got  %s\n want %s", i, c.group, g.Pattern, c.pattern)
		}
		if g.ExceptionClass != c.class {
			t.Errorf("entry %d: class %q, want %q", i, g.ExceptionClass, c.class)
		}
		if !ValidGroupID(g.ID) {
			t.Errorf("entry %d: id %q is not a group id", i, g.ID)
		}
		if id, ok := idOfLabel[c.group]; ok && id != g.ID {
			t.Errorf("entry %d: %s split into two groups (%s, %s)", i, c.group, id, g.ID)
		}
		idOfLabel[c.group] = g.ID
		if l, ok := labelOfID[g.ID]; ok && l != c.group {
			t.Errorf("entry %d: %s and %s fell into one group %s", i, c.group, l, g.ID)
		}
		labelOfID[g.ID] = c.group
	}
}

// Rows stored before sources reported the class are grouped by the class
// their headers give, as intake read it then.
func TestLegacyExceptionClassHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		hs   []Header
		want string
	}{
		{"spring", []Header{{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("java.lang.IllegalStateException")}}, "java.lang.IllegalStateException"},
		{"connect", []Header{{Key: []byte("__connect.errors.exception.class.name"), Value: []byte("org.apache.kafka.connect.errors.DataException")}}, "org.apache.kafka.connect.errors.DataException"},
		{"latest wins", []Header{{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("A")}, {Key: []byte("KAFKA_DLT-EXCEPTION-FQCN"), Value: []byte("B")}}, "B"},
		{"none", []Header{{Key: []byte("error"), Value: []byte("x")}}, ""},
		{"empty value", []Header{{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("  ")}}, ""},
	} {
		if got := LegacyExceptionClass(tc.hs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNormaliseErrorBounds(t *testing.T) {
	long := ""
	for i := 0; i < 2000; i++ {
		long += "é1 "
	}
	p := NormaliseError(long)
	if len(p) > maxPatternLength {
		t.Fatalf("pattern of %d bytes", len(p))
	}
	for _, bad := range []string{"", "0123456789abcdef0", "0123456789ABCDEF", "0123456789abcdeg"} {
		if ValidGroupID(bad) {
			t.Errorf("%q accepted as a group id", bad)
		}
	}
	if !ValidGroupID("0123456789abcdef") {
		t.Error("a valid group id refused")
	}
}

// BenchmarkNormaliseError is the normaliser's cost on the corpus, the work
// intake does for each new error text (a storm repeats one, which the
// group cache answers).
func BenchmarkNormaliseError(b *testing.B) {
	for b.Loop() {
		for _, c := range corpus {
			NormaliseError(c.err)
		}
	}
}
