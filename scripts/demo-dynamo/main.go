// Command demo-dynamo creates the demo's DynamoDB audit_logs table in
// dynalite and seeds it for the given tenants.
package main

import (
	"context"
	"flag"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lifecycled/lifecycled/internal/seed001"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8000", "dynalite URL")
	tenants := flag.String("tenants", "", "comma-separated tenant ids")
	items := flag.Int("items", 40, "items per tenant")
	flag.Parse()
	ctx := context.Background()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(*endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("demo", "demo", "")})
	if err := seed001.CreateAuditLogTable(ctx, c, "audit_logs"); err != nil {
		log.Fatal(err)
	}
	for _, t := range strings.Split(*tenants, ",") {
		if err := seed001.PutAuditLogs(ctx, c, "audit_logs", t, *items); err != nil {
			log.Fatal(err)
		}
	}
}
