package lake

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/cdcsync/cdcsync/config"
)

// s3Config builds the AWS configuration of the warehouse's S3 client: its
// HTTP client bounds every request by timeout (see s3HTTPClient), and a
// private CA (warehouse.s3.ca_file) is trusted when one is configured.
// Endpoint, region and keys still travel as iceberg-go properties, which
// override what this configuration says.
func s3Config(ctx context.Context, s *config.S3, timeout time.Duration) (*aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithHTTPClient(s3HTTPClient(timeout))}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read warehouse.s3.ca_file: %w", err)
		}
		opts = append(opts, awsconfig.WithCustomCABundle(bytes.NewReader(pem)))
	}
	if s.Region != "" {
		opts = append(opts, awsconfig.WithRegion(s.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		if s.CAFile != "" {
			return nil, fmt.Errorf("load the AWS configuration with warehouse.s3.ca_file %s: %w", s.CAFile, err)
		}
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	return &cfg, nil
}

// Scope returns ctx carrying the lake's S3 settings that cannot travel as
// catalog properties (request timeouts, a private CA). Every call into
// iceberg-go that may touch the warehouse runs under it.
func (l *Lake) Scope(ctx context.Context) context.Context {
	if l.aws == nil {
		return ctx
	}
	return utils.WithAwsConfig(ctx, l.aws)
}
