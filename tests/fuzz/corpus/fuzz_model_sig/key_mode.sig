{
  "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
  "verificationMaterial": {
    "publicKey": {
      "hint": "1068d36ec5fb9121542947730dcce1d5fc7d3a62fbab28a1d54ff1e788c7b15e"
    },
    "tlogEntries": []
  },
  "dsseEnvelope": {
    "payload": "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEiLCJzdWJqZWN0IjpbeyJuYW1lIjoibSIsImRpZ2VzdCI6eyJzaGEyNTYiOiJhM2I2MzM1ODYyMzBhMTY0ZmJhNDU2NGQ1MTNiNjU1NzQzZjA0OTBlMTNkNGQ0NmEwYjdmMTllZDk0MmE2M2EzIn19XSwicHJlZGljYXRlVHlwZSI6Imh0dHBzOi8vbW9kZWxfc2lnbmluZy9zaWduYXR1cmUvdjEuMCIsInByZWRpY2F0ZSI6eyJzZXJpYWxpemF0aW9uIjp7Im1ldGhvZCI6ImZpbGVzIiwiaGFzaF90eXBlIjoic2hhMjU2IiwiYWxsb3dfc3ltbGlua3MiOmZhbHNlLCJpZ25vcmVfcGF0aHMiOlsibW9kZWwuc2lnIiwiLmdpdCIsIi5naXRhdHRyaWJ1dGVzIiwiLmdpdGh1YiIsIi5naXRpZ25vcmUiXX0sInJlc291cmNlcyI6W3sibmFtZSI6ImEudHh0IiwiYWxnb3JpdGhtIjoic2hhMjU2IiwiZGlnZXN0IjoiNTg5MWI1YjUyMmQ1ZGYwODZkMGZmMGIxMTBmYmQ5ZDIxYmI0ZmM3MTYzYWYzNGQwODI4NmEyZTg0NmY2YmUwMyJ9LHsibmFtZSI6InN1Yi93LmJpbiIsImFsZ29yaXRobSI6InNoYTI1NiIsImRpZ2VzdCI6IjYwZTUyMmU1NjZmYWNkNWM1YjljYjllNzI2YzFmZTFlNDAzZmEyNjViMTM2MzJmYjcwZjkwOThhZmNhOTljNDIifV19fQ==",
    "payloadType": "application/vnd.in-toto+json",
    "signatures": [
      {
        "sig": "MEUCIFqeOIH95e5jwMAt824ZdGcYM93TRgWGcn/BeWpqLDJcAiEAxjWKwrGNtEiNRb4hEER0HqW/8nBalIOj1QMZbnGCE+0=",
        "keyid": ""
      }
    ]
  }
}
