package lake

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/cdcsync/cdcsync/config"
)

// s3Config builds the AWS configuration for an S3 endpoint whose TLS
// certificate is signed by a private CA (warehouse.s3.ca_file). It returns
// nil when no CA file is configured: iceberg-go then builds its own from the
// standard chain.
func s3Config(ctx context.Context, s *config.S3) (*aws.Config, error) {
	if s.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read warehouse.s3.ca_file: %w", err)
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithCustomCABundle(bytes.NewReader(pem))}
	if s.Region != "" {
		opts = append(opts, awsconfig.WithRegion(s.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration with warehouse.s3.ca_file %s: %w", s.CAFile, err)
	}
	return &cfg, nil
}

// Scope returns ctx carrying the lake's S3 settings that cannot travel as
// catalog properties (a private CA). Every call into iceberg-go that may
// touch the warehouse runs under it.
func (l *Lake) Scope(ctx context.Context) context.Context {
	if l.aws == nil {
		return ctx
	}
	return utils.WithAwsConfig(ctx, l.aws)
}
