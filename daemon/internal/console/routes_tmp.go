package console

import "net/http"

func (c *Console) tenantRoutes(mux *http.ServeMux)    {}
func (c *Console) retentionRoutes(mux *http.ServeMux) {}
