package main

import "github.com/whimbrel/whimbrel/web"

// TLSFlags are the web view's certificate, for every command that serves
// it.
type TLSFlags struct {
	TLSCert string `name:"tls-cert" type:"existingfile" help:"Serve the web view over HTTPS with this certificate (PEM, the chain first); needs --tls-key."`
	TLSKey  string `name:"tls-key" type:"existingfile" help:"The private key (PEM) of --tls-cert."`
}

// listen is where and how the web view listens.
func (f TLSFlags) listen(addr string) web.ListenOptions {
	return web.ListenOptions{Addr: addr, CertFile: f.TLSCert, KeyFile: f.TLSKey}
}
