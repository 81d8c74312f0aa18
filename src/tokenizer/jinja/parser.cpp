#include "tokenizer/jinja/parser.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"
#include "tokenizer/jinja/lexer.h"

namespace rinfer::jinja {

namespace {

[[noreturn]] void too_deep(int line, int limit) {
  fail("chat template: line ", line, ": nesting deeper than ", limit);
}

// Recursive descent over one expression's tokens, with Jinja2's precedence:
// if-else < or < and < not < comparisons < ~ < + - < * / // % < ** < unary
// < postfix (.attr [index] (call) |filter is-test).
class ExprParser {
 public:
  // base: the block nesting the expression sits in; limit: max_nesting.
  ExprParser(std::vector<Token> toks, int line, int base, int limit)
      : t_(std::move(toks)), line_(line), base_(base), limit_(limit) {}

  ExprPtr expression() {
    Depth d(this);
    return conditional();
  }
  bool at_end() const { return t_[i_].kind == Token::End; }
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Token::Name && peek(k).text == n; }
  bool is_op(const char* o, size_t k = 0) const { return peek(k).kind == Token::Op && peek(k).text == o; }
  Token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  void expect_op(const char* o) {
    RINFER_CHECK(is_op(o), "chat template: line ", line_, ": expected '", o, "', got '", peek().text, "'");
    ++i_;
  }
  std::string expect_name() {
    RINFER_CHECK(peek().kind == Token::Name, "chat template: line ", line_, ": expected a name, got '", peek().text,
                 "'");
    return next().text;
  }
  void expect_end() {
    RINFER_CHECK(at_end(), "chat template: line ", line_, ": unexpected '", peek().text, "'");
  }
  int line() const { return line_; }

 private:
  // The recursive-descent entries (expression, not, unary) count the
  // recursion; parentheses nest without making a node.
  struct Depth {
    explicit Depth(ExprParser* p) : p_(p) {
      if (p->base_ + ++p->rec_ > p->limit_) too_deep(p->line_, p->limit_);
    }
    ~Depth() { --p_->rec_; }
    ExprParser* p_;
  };
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  // Every node with children passes here once they are attached: loops
  // (a.b.c..., 1+1+1...) wrap nodes without recursing, so the tree's depth
  // is checked where it grows.
  ExprPtr node(ExprPtr e) {
    int d = 0;
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get(), e->d.get()})
      if (c) d = std::max(d, c->depth);
    for (const auto& x : e->args) d = std::max(d, x->depth);
    for (const auto& [k, x] : e->kwargs) d = std::max(d, x->depth);
    e->depth = d + 1;
    if (base_ + e->depth > limit_) too_deep(line_, limit_);
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Binary);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return node(std::move(e));
  }

  ExprPtr conditional() {
    ExprPtr e = or_expr();
    while (is_name("if")) {
      ++i_;
      auto c = make(Expr::Cond);
      c->b = or_expr();
      if (is_name("else")) {
        ++i_;
        c->c = or_expr();
      }
      c->a = std::move(e);
      e = node(std::move(c));
    }
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      ++i_;
      e = binary("or", std::move(e), and_expr());
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      ++i_;
      e = binary("and", std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(this);
      ++i_;
      auto e = make(Expr::Unary);
      e->name = "not";
      e->a = not_expr();
      return node(std::move(e));
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    while (true) {
      static const char* kCmp[] = {"==", "!=", "<", ">", "<=", ">="};
      std::string op;
      for (const char* c : kCmp)
        if (is_op(c)) op = c;
      if (!op.empty()) {
        ++i_;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = binary(op, std::move(e), concat());
    }
  }
  ExprPtr concat() {
    ExprPtr e = additive();
    while (is_op("~")) {
      ++i_;
      e = binary("~", std::move(e), additive());
    }
    return e;
  }
  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), multiplicative());
    }
    return e;
  }
  ExprPtr multiplicative() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (is_op("**")) {
      ++i_;
      e = binary("**", std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      Depth d(this);
      auto e = make(Expr::Unary);
      e->name = next().text;
      e->a = unary();
      return node(std::move(e));
    }
    return postfix(primary());
  }
  void call_args(Expr* e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::Name && is_op("=", 1)) {
        std::string k = next().text;
        ++i_;
        e->kwargs.emplace_back(std::move(k), expression());
      } else {
        e->args.push_back(expression());
      }
      if (!is_op(")")) expect_op(",");
    }
    expect_op(")");
  }
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        ++i_;
        auto a = make(Expr::Attr);
        a->name = expect_name();
        a->a = std::move(e);
        e = node(std::move(a));
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int n = 0;
        bool slice = false;
        while (true) {
          if (!is_op(":") && !is_op("]")) parts[n] = expression();
          if (is_op(":") && n < 2) {
            ++i_;
            ++n;
            slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        // x[] is a syntax error in Jinja (a slice's parts may all be empty).
        RINFER_CHECK(slice || parts[0], "chat template: line ", line_, ": expected an index or a slice in '[]'");
        auto x = make(slice ? Expr::Slice : Expr::Index);
        x->a = std::move(e);
        x->b = std::move(parts[0]);
        x->c = std::move(parts[1]);
        x->d = std::move(parts[2]);
        e = node(std::move(x));
      } else if (is_op("(")) {
        auto c = make(Expr::Call);
        c->a = std::move(e);
        call_args(c.get());
        e = node(std::move(c));
      } else if (is_op("|")) {
        ++i_;
        auto f = make(Expr::Filter);
        f->name = expect_name();
        f->a = std::move(e);
        if (is_op("(")) call_args(f.get());
        e = node(std::move(f));
      } else if (is_name("is")) {
        ++i_;
        auto t = make(Expr::Test);
        if (is_name("not")) {
          ++i_;
          t->negate = true;
        }
        t->name = expect_name();
        t->a = std::move(e);
        if (is_op("(")) {
          call_args(t.get());
        } else if (peek().kind == Token::String || peek().kind == Token::Int || peek().kind == Token::Float ||
                   (peek().kind == Token::Name && !is_name("and") && !is_name("or") && !is_name("else") &&
                    !is_name("if") && !is_name("in") && !is_name("not") && !is_name("is"))) {
          t->args.push_back(primary());  // "x is divisibleby 3", "x is sameas none"
        }
        e = node(std::move(t));
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Token tok = next();
    auto lit = [&](Value v) {
      auto e = make(Expr::Literal);
      e->value = std::move(v);
      return e;
    };
    switch (tok.kind) {
      case Token::String: {
        std::string s = tok.text;
        while (peek().kind == Token::String) s += next().text;  // adjacent literals concatenate
        return lit(Value(std::move(s)));
      }
      case Token::Int: {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        RINFER_CHECK(ec == std::errc(), "chat template: line ", line_, ": integer out of range: ", tok.text);
        return lit(Value(v));
      }
      case Token::Float:  // strtod: 1e999 is inf, as in Python
        return lit(Value(std::strtod(tok.text.c_str(), nullptr)));
      case Token::Name: {
        if (tok.text == "true" || tok.text == "True") return lit(Value(true));
        if (tok.text == "false" || tok.text == "False") return lit(Value(false));
        if (tok.text == "none" || tok.text == "None") return lit(Value(None{}));
        auto e = make(Expr::Name);
        e->name = tok.text;
        return e;
      }
      case Token::Op:
        if (tok.text == "(") {
          ExprPtr e = expression();
          if (is_op(",")) {  // a tuple: evaluated as a list
            auto l = make(Expr::ListLit);
            l->args.push_back(std::move(e));
            while (is_op(",")) {
              ++i_;
              if (is_op(")")) break;
              l->args.push_back(expression());
            }
            e = node(std::move(l));
          }
          expect_op(")");
          return e;
        }
        if (tok.text == "[") {
          auto l = make(Expr::ListLit);
          while (!is_op("]")) {
            l->args.push_back(expression());
            if (!is_op("]")) expect_op(",");
          }
          expect_op("]");
          return node(std::move(l));
        }
        if (tok.text == "{") {
          auto d = make(Expr::DictLit);
          while (!is_op("}")) {
            d->args.push_back(expression());
            expect_op(":");
            d->args.push_back(expression());
            if (!is_op("}")) expect_op(",");
          }
          expect_op("}");
          return node(std::move(d));
        }
        break;
      case Token::End:
        fail("chat template: line ", line_, ": unexpected end of expression");
    }
    fail("chat template: line ", line_, ": unexpected '", tok.text, "'");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
  int base_, limit_;
  int rec_ = 0;  // recursion of the entries (Depth)
};

class TemplateParser {
 public:
  TemplateParser(std::vector<Segment> segs, const Budget& budget)
      : s_(std::move(segs)), limit_(budget.max_nesting) {}

  Body parse_all() {
    Body b = parse_body({});
    if (i_ < s_.size()) fail("chat template: line ", s_[i_].line, ": unexpected '", tag_name(s_[i_]), "'");
    return b;
  }

 private:
  static std::string tag_name(const Segment& s) {
    auto t = tokenize(s.text, s.line);
    return t[0].text;
  }

  // Parses until a statement whose tag is in `stops` (left unconsumed).
  Body parse_body(const std::vector<std::string>& stops) {
    // The recursive entry of the statement parser: one level per block.
    if (++depth_ > limit_) too_deep(i_ < s_.size() ? s_[i_].line : 0, limit_);
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    Body body;
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_];
      if (seg.kind == Segment::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Text;
        n->text = seg.text;
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (seg.kind == Segment::Expr) {
        ExprParser p(tokenize(seg.text, seg.line), seg.line, depth_, limit_);
        auto n = std::make_unique<Node>();
        n->kind = Node::Output;
        n->line = seg.line;
        n->expr = p.expression();
        p.expect_end();
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      const std::string tag = tag_name(seg);
      for (const auto& s : stops)
        if (tag == s) return body;
      body.push_back(statement(tag));
    }
    if (!stops.empty()) fail("chat template: missing '{% ", stops.back(), " %}'");
    return body;
  }

  ExprParser open_tag() {
    const Segment& seg = s_[i_++];
    ExprParser p(tokenize(seg.text, seg.line), seg.line, depth_, limit_);
    p.next();  // the tag name
    return p;
  }

  void close_tag(const char* name) {
    RINFER_CHECK(i_ < s_.size(), "chat template: missing '{% ", name, " %}'");
    ExprParser p = open_tag();
    p.expect_end();
  }

  NodePtr statement(const std::string& tag) {
    auto n = std::make_unique<Node>();
    n->line = s_[i_].line;
    if (tag == "if") {
      n->kind = Node::If;
      ExprParser p = open_tag();
      ExprPtr cond = p.expression();
      p.expect_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        n->branches.emplace_back(std::move(cond), std::move(b));
        RINFER_CHECK(i_ < s_.size(), "chat template: missing '{% endif %}'");
        const std::string t = tag_name(s_[i_]);
        if (t == "endif") {
          close_tag("endif");
          break;
        }
        ExprParser q = open_tag();
        if (t == "elif") {
          cond = q.expression();
          q.expect_end();
          continue;
        }
        q.expect_end();  // else
        Body e = parse_body({"endif"});
        n->branches.emplace_back(nullptr, std::move(e));
        close_tag("endif");
        break;
      }
      return n;
    }
    if (tag == "for") {
      n->kind = Node::For;
      ExprParser p = open_tag();
      n->targets.push_back(p.expect_name());
      while (p.is_op(",")) {
        p.next();
        n->targets.push_back(p.expect_name());
      }
      RINFER_CHECK(p.is_name("in"), "chat template: line ", n->line, ": expected 'in' in for loop");
      p.next();
      // "for x in xs if cond": the expression parser reads "xs if cond" as
      // a conditional without else, which is exactly the loop filter.
      n->expr = p.expression();
      if (n->expr->kind == Expr::Cond && !n->expr->c) {
        n->filter = std::move(n->expr->b);
        n->expr = std::move(n->expr->a);
      }
      RINFER_CHECK(!p.is_name("recursive"), "chat template: line ", n->line,
                   ": unsupported syntax: recursive for loops");
      p.expect_end();
      n->body = parse_body({"else", "endfor"});
      if (tag_name(s_[i_]) == "else") {
        close_tag("else");
        n->else_body = parse_body({"endfor"});
      }
      close_tag("endfor");
      return n;
    }
    if (tag == "set") {
      ExprParser p = open_tag();
      n->targets.push_back(p.expect_name());
      if (p.is_op(".")) {
        p.next();
        n->targets.push_back(p.expect_name());
      }
      RINFER_CHECK(!p.is_op(","), "chat template: line ", n->line, ": unsupported syntax: tuple assignment in set");
      if (p.at_end()) {
        n->kind = Node::SetBlock;
        n->body = parse_body({"endset"});
        close_tag("endset");
        return n;
      }
      n->kind = Node::Set;
      p.expect_op("=");
      n->expr = p.expression();
      p.expect_end();
      return n;
    }
    if (tag == "macro") {
      n->kind = Node::Macro;
      ExprParser p = open_tag();
      n->targets.push_back(p.expect_name());
      p.expect_op("(");
      while (!p.is_op(")")) {
        std::string name = p.expect_name();
        ExprPtr dflt;
        if (p.is_op("=")) {
          p.next();
          dflt = p.expression();
        }
        n->params.emplace_back(std::move(name), std::move(dflt));
        if (!p.is_op(")")) p.expect_op(",");
      }
      p.expect_op(")");
      p.expect_end();
      n->body = parse_body({"endmacro"});
      close_tag("endmacro");
      return n;
    }
    if (tag == "break" || tag == "continue") {
      n->kind = tag == "break" ? Node::Break : Node::Continue;
      close_tag(tag.c_str());
      return n;
    }
    fail("chat template: line ", n->line, ": unsupported tag \"", tag, "\"");
  }

 private:
  std::vector<Segment> s_;
  size_t i_ = 0;
  int limit_;
  int depth_ = 0;  // blocks open (parse_body)
};

}  // namespace

Body parse_template(const std::string& source, const Budget& budget) {
  TemplateParser p(split_template(source), budget);
  return p.parse_all();
}

}  // namespace rinfer::jinja
