package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securityKeys are the Java client's security settings the driver maps to franz-go (TLS dialer
// and SASL mechanism); propertyOpts hands them here.
var securityKeys = map[string]bool{
	"security.protocol": true, "ssl.truststore.location": true, "ssl.truststore.type": true,
	"ssl.keystore.location": true, "ssl.keystore.type": true, "sasl.mechanism": true,
	"sasl.jaas.config": true, "sasl.login.callback.handler.class": true,
	"sasl.oauthbearer.token.endpoint.url": true, "sasl.kerberos.service.name": true,
}

// A JAAS option: name="quoted value" or name=bare (Krb5LoginModule's useKeyTab=true).
var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*(?:"([^"]*)"|([^\s";]+))`)

// securityOpts turns security.protocol, PEM trust/key stores (Kafka's ssl.*.type=PEM: the key
// store holds the PKCS#8 key and the certificate chain in one file) and sasl.mechanism with the
// username/password of sasl.jaas.config into franz-go options. What franz-go cannot take the
// same way (JKS/PKCS12 stores, other mechanisms) is refused, never ignored.
func securityOpts(s map[string]string) ([]kgo.Opt, error) {
	protocol := strings.ToUpper(s["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	var opts []kgo.Opt
	switch protocol {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		config := &tls.Config{MinVersion: tls.VersionTLS12}
		for _, store := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if t, ok := s[store]; ok && !strings.EqualFold(t, "PEM") {
				return nil, usagef("--property %s=%s: the franz-go driver reads PEM stores only", store, t)
			}
		}
		if path, ok := s["ssl.truststore.location"]; ok {
			pem, err := os.ReadFile(path)
			if err != nil {
				return nil, usagef("ssl.truststore.location: %v", err)
			}
			config.RootCAs = x509.NewCertPool()
			if !config.RootCAs.AppendCertsFromPEM(pem) {
				return nil, usagef("ssl.truststore.location %s holds no PEM certificate", path)
			}
		}
		if path, ok := s["ssl.keystore.location"]; ok {
			pem, err := os.ReadFile(path)
			if err != nil {
				return nil, usagef("ssl.keystore.location: %v", err)
			}
			// One file, key and chain: X509KeyPair picks the blocks it needs from each argument.
			pair, err := tls.X509KeyPair(pem, pem)
			if err != nil {
				return nil, usagef("ssl.keystore.location %s: %v", path, err)
			}
			config.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second},
			Config: config}).DialContext))
	default:
		return nil, usagef("--property security.protocol=%s: unknown protocol", protocol)
	}
	mechanism, hasMechanism := s["sasl.mechanism"]
	if !strings.HasPrefix(protocol, "SASL_") {
		if hasMechanism {
			fmt.Fprintf(os.Stderr, "kbroker-go-driver: sasl.mechanism is unused with security.protocol=%s\n", protocol)
		}
		return opts, nil
	}
	jaas := map[string]string{}
	for _, m := range jaasOption.FindAllStringSubmatch(s["sasl.jaas.config"], -1) {
		jaas[m[1]] = m[2] + m[3] // one of the two is empty
	}
	if strings.ToUpper(mechanism) == "OAUTHBEARER" && s["sasl.oauthbearer.token.endpoint.url"] != "" {
		// Kafka's OAuthBearerLoginCallbackHandler settings: a client-credentials token from the
		// endpoint for each login, through franz-go's sasl/oauth.
		url := s["sasl.oauthbearer.token.endpoint.url"]
		return append(opts, kgo.SASL(oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			token, err := clientCredentialsToken(ctx, url, jaas["clientId"], jaas["clientSecret"], jaas["scope"])
			return oauth.Auth{Token: token}, err
		}))), nil
	}
	if m := strings.ToUpper(mechanism); m == "GSSAPI" || m == "" { // Java's default mechanism
		mech, err := kerberosMechanism(s, jaas)
		if err != nil {
			return nil, err
		}
		return append(opts, kgo.SASL(mech)), nil
	}
	user, password := jaas["username"], jaas["password"]
	if user == "" {
		return nil, usagef("--property sasl.jaas.config needs username=\"...\" password=\"...\"")
	}
	switch strings.ToUpper(mechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()))
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		// Kafka's ScramLoginModule option tokenauth="true": a delegation token (KIP-48), the
		// token id as the user and its HMAC (base64) as the password.
		auth := scram.Auth{User: user, Pass: password, IsToken: strings.EqualFold(jaas["tokenauth"], "true")}
		if strings.ToUpper(mechanism) == "SCRAM-SHA-256" {
			opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
		} else {
			opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
		}
	default:
		return nil, usagef("--property sasl.mechanism=%s: not mapped by the franz-go driver", mechanism)
	}
	return opts, nil
}

// kerberosMechanism maps Java's GSSAPI settings to franz-go's sasl/kerberos over gokrb5: the
// Krb5LoginModule options of sasl.jaas.config (useKeyTab=true, keyTab, principal), the service
// name of sasl.kerberos.service.name, and the Kerberos configuration the JVM would read (MIT's
// KRB5_CONFIG here, where Java takes -Djava.security.krb5.conf). A login without a keytab (a
// ticket cache) is refused, never guessed.
func kerberosMechanism(s map[string]string, jaas map[string]string) (sasl.Mechanism, error) {
	service := s["sasl.kerberos.service.name"]
	if service == "" {
		return nil, usagef("--property sasl.kerberos.service.name is required with sasl.mechanism=GSSAPI")
	}
	if !strings.Contains(s["sasl.jaas.config"], "Krb5LoginModule") || !strings.EqualFold(jaas["useKeyTab"], "true") ||
		jaas["keyTab"] == "" || jaas["principal"] == "" {
		return nil, usagef("GSSAPI: sasl.jaas.config needs Krb5LoginModule with useKeyTab=true keyTab=\"...\" principal=\"...\"")
	}
	user, realm, found := strings.Cut(jaas["principal"], "@")
	if !found || realm == "" {
		return nil, usagef("GSSAPI: principal %q has no realm (user@REALM)", jaas["principal"])
	}
	confPath := os.Getenv("KRB5_CONFIG")
	if confPath == "" {
		confPath = "/etc/krb5.conf"
	}
	conf, err := krbconfig.Load(confPath)
	if err != nil {
		return nil, usagef("GSSAPI: Kerberos configuration %s: %v", confPath, err)
	}
	kt, err := keytab.Load(jaas["keyTab"])
	if err != nil {
		return nil, usagef("GSSAPI: keyTab %s: %v", jaas["keyTab"], err)
	}
	// A login per connection, destroyed after it (the driver's commands open and close several
	// kgo clients; one shared Kerberos client would be destroyed with the first). MIT's KDC
	// answers without FAST; gokrb5 would otherwise ask for it.
	return kerberos.Kerberos(func(context.Context) (kerberos.Auth, error) {
		client := krbclient.NewWithKeytab(user, realm, kt, conf, krbclient.DisablePAFXFAST(true))
		return kerberos.Auth{Client: client, Service: service}, nil
	}), nil
}

// clientCredentialsToken asks an OAuth token endpoint for a client-credentials access token, the
// client id and secret in an HTTP Basic header as Kafka's and librdkafka's logins send them.
func clientCredentialsToken(ctx context.Context, endpoint, id, secret, scope string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint %s answered %s", endpoint, resp.Status)
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.AccessToken, nil
}
