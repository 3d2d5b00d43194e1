// The custom part of the protocol between this extension and `cuda-agent serve`. Plain types: no
// vscode import. Every custom method and payload is declared once, in Python (server/protocol.py
// and the records it carries); ./protocol.generated.ts is written from there by
// `python -m server.protocol_ts`, and tests/test_protocol.py fails when it is not current.

/** LSP position and range (0-based lines and UTF-16 columns). */
export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}
export interface TextEdit {
  range: Range;
  newText: string;
}

export * from "./protocol.generated";
