// A data block of the page: JSON, xz-compressed, in base64 (kora.analysis.pagekit.pack).
// xz-decompress.min.js, included before this, decodes xz in WebAssembly from the bytes in
// the page: no fetch, which a page opened from a file may not make.
function koraUnpack(node) {
  var text = node.textContent, bytes;
  if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(text);
  else {  // browsers before 2025
    var raw = atob(text);
    bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  }
  var xz = window["xz-decompress"];
  var stream = new xz.XzReadableStream(new Blob([bytes]).stream());
  return new Response(stream).json();
}

// what a page says in place of its data when koraUnpack failed with `e`
function koraUnreadable(e) {
  return "This browser could not open the conversations packed in this page (" + e + "). A browser of 2023 or later opens them.";
}
