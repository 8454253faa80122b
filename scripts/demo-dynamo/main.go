// Command demo-dynamo creates the demo's DynamoDB audit_logs table in
// dynalite and seeds it for the given tenants.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8000", "dynalite URL")
	tenants := flag.String("tenants", "", "comma-separated tenant ids")
	items := flag.Int("items", 40, "items per tenant")
	flag.Parse()
	ctx := context.Background()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(*endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("demo", "demo", "")})
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("audit_logs"),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("tenant_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("log_id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("tenant_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("log_id"), KeyType: types.KeyTypeRange}},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	for _, t := range strings.Split(*tenants, ",") {
		for i := 0; i < *items; i++ {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("audit_logs"), Item: map[string]types.AttributeValue{
				"tenant_id": &types.AttributeValueMemberS{Value: t},
				"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%06d", i)},
			}})
			if err != nil {
				log.Fatal(err)
			}
		}
	}
}
